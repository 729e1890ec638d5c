"""The ``cvdiag`` command: find, correlate and show CVDIAG lines in any log.

Exit codes: 0 found/ok, 1 nothing found or invalid input, 2 usage error. Errors are
one line on stderr, never a traceback. Heavy imports (rich, diagnosis) happen only in
the command that needs them, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from cvdiag.contract.schema import FAILURE_OUTCOMES
from cvdiag.contract.timestamps import parse_ts, ts_seconds
from cvdiag.face.render import (
    DIM,
    FAIL,
    OK,
    WARN,
    Column,
    Out,
    Progress,
    ms,
    offset,
    one_utc_date,
    printable,
    unique_prefixes,
)
from cvdiag.read import correlate
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import BREADCRUMB, ENVELOPE, MALFORMED, MARKERS, Tally
from cvdiag.read.scan import read
from cvdiag.read.sources import InputError, Source, resolve_sources

OK_EXIT, NOTHING_EXIT, USAGE_EXIT = 0, 1, 2
SILENCE_S = 1.0
_DETAIL_CHARS = 110


class UsageError(Exception):
    """Bad arguments found after parsing (exit 2)."""


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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cvdiag",
        description="Find, correlate and explain CVDIAG lines in any log (files, directories, .gz, stdin).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--json", action="store_true", help="machine output on stdout")
        return sp

    def paths(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("paths", nargs="*", metavar="PATH", help="files, directories, .gz, or - for stdin")

    def window(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--since", type=when, metavar="T", help="from this time (RFC 3339, date, or 15m/2h/1d ago)")
        sp.add_argument("--until", type=when, metavar="T", help="up to this time")

    def slow(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--slow-s", type=float, default=30.0, metavar="S", help="LLM slow threshold (default 30)")

    sp = command("tests", "one row per test id: layers, events, timing, terminal, status, class")
    sp.add_argument("--failed", action="store_true", help="only tests whose status is fail")
    sp.add_argument("--slug", help="only tests of this slug")
    window(sp)
    slow(sp)
    sp.add_argument("--no-class", action="store_true", help="skip diagnosis (faster: no JSON parsing at all)")
    sp.add_argument(
        "--format",
        choices=("table", "json", "github", "junit"),
        default="table",
        help="table (default), json (as --json), github (::error annotations of failed tests), junit (JUnit XML)",
    )
    sp.add_argument("-j", "--jobs", type=int, default=correlate.default_jobs(), help="worker processes")
    paths(sp)

    sp = command("timeline", "every event of one test across layers and files, in time order")
    sp.add_argument("test_id", metavar="TEST_ID", help="a test id or a unique prefix of one")
    sp.add_argument("--with-logs", action="store_true", help="also show other lines that mention the id")
    sp.add_argument("--follow", "-f", action="store_true", help="keep reading as the files grow")
    slow(sp)
    paths(sp)

    sp = command("grep", "stream matching envelopes as NDJSON")
    sp.add_argument("--test-id", metavar="ID", help="test id or prefix")
    sp.add_argument("--slug")
    sp.add_argument("--layer", choices=("probe", "backend", "aimock"))
    sp.add_argument("--boundary", metavar="NAME_OR_GLOB")
    sp.add_argument("--outcome", choices=("ok", "err", "timeout", "info"))
    sp.add_argument("--raw", action="store_true", help="print the original lines instead")
    sp.add_argument("--follow", "-f", action="store_true", help="keep reading as the files grow")
    window(sp)
    paths(sp)

    sp = command("stats", "per slug and boundary: counts, outcomes, latency percentiles")
    paths(sp)

    sp = command("validate", "check every envelope strictly against schema v1")
    paths(sp)

    sp = command("report", "one self-contained HTML file: every test, and a waterfall per failed test")
    sp.add_argument(
        "-o", "--output", default="cvdiag-report.html", metavar="FILE", help="where to write it (- for stdout)"
    )
    sp.add_argument("--all", action="store_true", help="a waterfall for every test, not only failed and flagged ones")
    sp.add_argument("--title", default="cvdiag report", help="the page title")
    sp.add_argument("--compare", nargs=2, metavar=("A", "B"), help="also show tests A and B side by side")
    slow(sp)
    sp.add_argument("-j", "--jobs", type=int, default=correlate.default_jobs(), help="worker processes")
    paths(sp)

    sp = command("diagnose", "name the root cause of a test's failure")
    sp.add_argument("--all", action="store_true", help="every test in the inputs")
    slow(sp)
    sp.add_argument("args", nargs="*", metavar="TEST_ID|PATH", help="TEST_ID then PATHs, or only PATHs with --all")

    sp = command("compare", "two tests side by side: events aligned by boundary, the first divergence")
    sp.add_argument("a", metavar="A", help="a test id or unique prefix (typically a passing run)")
    sp.add_argument("b", metavar="B", help="another test id or unique prefix (typically the failing run)")
    slow(sp)
    paths(sp)

    sub.add_parser("demo", help="run a bundled example app and show its diagnosis", add_help=False)
    return p


# -- inputs ---------------------------------------------------------------------------


def _sources(paths: Sequence[str], *, spool_stdin: bool = False) -> list[Source]:
    if not paths:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("no input: give a PATH (file, directory, .gz) or pipe a log into cvdiag")
        paths = ["-"]
    sources = resolve_sources(paths)
    if spool_stdin:  # commands that read twice need stdin (or a FIFO) in a file
        from cvdiag.read.spool import spooled

        sources = [spooled(s) if s.stream else s for s in sources]
    return sources


def _progress(sources: list[Source]) -> Progress:
    return Progress(sum(s.size() for s in sources))


def _note(tally: Tally) -> None:
    note = tally.note()
    if note:
        _say(note)


def _say(text: str) -> None:
    """A note or error on stderr; log content in it (file names, ids) is shown, not obeyed."""
    print(printable(text), file=sys.stderr)


def _json_out(value: Any) -> None:
    sys.stdout.buffer.write(dumps(value, option=orjson.OPT_INDENT_2) + b"\n")


def _in_window(ts: float, since: float | None, until: float | None) -> bool:
    return (since is None or ts >= since) and (until is None or ts <= until)


# -- tests ----------------------------------------------------------------------------


def cmd_tests(args: argparse.Namespace) -> int:
    sources = _sources(args.paths, spool_stdin=not args.no_class)  # diagnosis may read twice
    progress = _progress(sources)
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
    rows = [
        r
        for r in scan.rows
        if (not args.failed or r["status"] == "fail")
        and (args.slug is None or args.slug in r["slug"].split(","))
        and _in_window(ts_seconds(r["first_ts"]), args.since, args.until)
    ]
    verdicts = {r["test_id"]: r.pop("_diagnosis", None) for r in rows}
    if fmt == "json":
        _json_out(rows)
        return OK_EXIT if rows else NOTHING_EXIT
    prefixes = unique_prefixes([r["test_id"] for r in scan.rows])
    if fmt in ("github", "junit"):
        return _ci_out(fmt, rows, verdicts, prefixes, args.paths)
    out = Out()
    if not rows:
        out.line("no tests found" if not scan.rows else "no test matches the filters")
        return NOTHING_EXIT
    _tests_table(out, rows, prefixes)
    failed = sum(r["status"] == "fail" for r in rows)
    date = one_utc_date([r["first_ts"] for r in rows])
    out.line(f"{len(rows)} tests, {failed} failed" + (f", on {date} (UTC)" if date else ""), FAIL if failed else OK)
    if failed:
        first = next(r for r in rows if r["status"] == "fail")
        hint = ["cvdiag", "timeline", prefixes[first["test_id"]], *args.paths]
        out.line(f"next: {shlex.join(hint)}", DIM)
    return OK_EXIT


def _ci_out(
    fmt: str, rows: list[dict[str, Any]], verdicts: dict[str, Any], prefixes: dict[str, str], paths: list[str]
) -> int:
    from cvdiag.face import ci

    if fmt == "github":
        for line in ci.github_annotations(rows, verdicts):
            sys.stdout.write(line + "\n")
    else:
        hints = {tid: shlex.join(["cvdiag", "timeline", p, *paths]) for tid, p in prefixes.items()}
        sys.stdout.buffer.write(ci.junit_xml(rows, verdicts, hints))
    return OK_EXIT if rows else NOTHING_EXIT


def _tests_table(out: Out, rows: list[dict[str, Any]], prefixes: dict[str, str]) -> None:
    """The ``tests`` table: ids never wrapped (cut in the middle, past their unique
    prefix), columns dropped by usefulness when the terminal is narrow."""
    clock = one_utc_date([r["first_ts"] for r in rows]) is not None
    id_width = max(len(prefixes[r["test_id"]]) for r in rows) + 5  # prefix, "…", 4 last characters
    columns = [
        Column("test_id", keep=True, min_width=id_width, middle=True),
        Column("slug", rank=3, min_width=8),
        Column("layers", rank=7),
        Column("events", right=True, rank=6),
        Column("start", rank=4),
        Column("duration", right=True, keep=True, rank=2),
        Column("terminal", rank=5),
        Column("status", keep=True, rank=0),
    ]
    with_class = "class" in rows[0]
    if with_class:
        columns.append(Column("class", keep=True, rank=1))
    table = []
    for r in rows:
        start = r["first_ts"][11:23] if clock else r["first_ts"]
        cells = [r["test_id"], r["slug"], ",".join(r["layers"]), r["events"], start, ms(r["duration_ms"])]
        cells += [r["terminal"], r["status"]] + ([r["class"] or ""] if with_class else [])
        table.append(cells)
    out.table(columns, table, [FAIL if r["status"] == "fail" else None for r in rows])


# -- timeline -------------------------------------------------------------------------


def _resolve_timeline(test_id: str, paths: Sequence[str], with_logs: bool) -> tuple[correlate.Timeline, list[Source]]:
    sources = _sources(paths, spool_stdin=True)
    needle = test_id.strip()
    if not needle:
        raise UsageError("TEST_ID is empty")
    tl = correlate.timeline(sources, needle, with_logs=with_logs)
    _note(tl.tally)
    return tl, sources


def _unknown_id(tl: correlate.Timeline, test_id: str, sources: list[Source]) -> int:
    if len(tl.candidates) > 1:
        shown = ", ".join(tl.candidates[:5]) + (", ..." if len(tl.candidates) > 5 else "")
        _say(f"cvdiag: {test_id!r} matches {len(tl.candidates)} test ids: {shown}; give more of it")
        return NOTHING_EXIT
    close = correlate.closest_ids(sources, test_id)
    hint = f"; closest: {', '.join(close)}" if close else "; the inputs hold no test ids"
    _say(f"cvdiag: no test id {test_id!r} in the inputs{hint}")
    return NOTHING_EXIT


def _details(env: dict[str, Any]) -> str:
    parts = []
    md = env.get("metadata")
    for k, v in md.items() if isinstance(md, dict) else ():
        if v is None:
            continue
        parts.append(f"{k}={v if isinstance(v, str | int | float) else dumps(v).decode()}")
    edges = env.get("edge_headers")
    for k, v in edges.items() if isinstance(edges, dict) else ():
        if v is not None:
            parts.append(f"{k}={v}")
    text = " ".join(parts)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _timeline_rows(entries: list[correlate.Entry]) -> Iterator[tuple[list[Any], str | None]]:
    if not entries:
        return
    start = entries[0].key[0]
    prev = start
    for e in entries:
        gap = e.key[0] - prev
        if gap > SILENCE_S:
            yield ["", "", f"··· no event for {gap:.1f} s", "", "", ""], WARN
        prev = max(prev, e.key[0])
        yield _timeline_row(e, e.key[0] - start)


def _timeline_row(e: correlate.Entry, since: float) -> tuple[list[Any], str | None]:
    if e.kind == "envelope":
        env = e.data
        failed = env.get("outcome") in FAILURE_OUTCOMES
        cells = [offset(since), env.get("layer"), env.get("boundary"), env.get("outcome"), ms(env.get("duration_ms"))]
        return [*cells, _details(env)], FAIL if failed else None
    if e.kind == "breadcrumb":
        b = e.data
        rest = " ".join(f"{k}={v}" for k, v in b.items() if k not in ("component", "boundary", "status", "test_id"))
        status = b.get("status", "")
        cells = [offset(since), b.get("component", "legacy"), f"breadcrumb {b.get('boundary', '')}", status, ""]
        return [*cells, rest[:_DETAIL_CHARS]], FAIL if status in ("miss", "error") else DIM
    text = e.data if len(e.data) <= _DETAIL_CHARS else e.data[: _DETAIL_CHARS - 1] + "…"
    return [offset(since), "log", os.path.basename(e.source), "", "", text], DIM


_TIMELINE_COLUMNS = [
    Column("t", right=True, keep=True, rank=1),
    Column("layer", rank=4),
    Column("boundary", keep=True),
    Column("outcome", keep=True, rank=0),
    Column("duration", right=True, keep=True, rank=2),
    Column("details", keep=True, rank=3, min_width=12),
]


def _verdict_lines(out: Out, d: Any) -> None:
    if d is None:
        return
    out.line(f"verdict: {d.cls} (confidence {d.confidence:.2f})", OK if d.cls == "ok" else FAIL)
    out.prose(d.reason, indent="  ")


def cmd_timeline(args: argparse.Namespace) -> int:
    tl, sources = _resolve_timeline(args.test_id, args.paths, args.with_logs)
    if tl.test_id is None:
        if not args.follow:
            return _unknown_id(tl, args.test_id, sources)
        print(f"cvdiag: waiting for {args.test_id!r} to appear", file=sys.stderr)
    d = correlate.diagnose_timeline(tl, args.slow_s) if tl.test_id else None
    if args.json:
        _json_out(_timeline_json(tl, d, args.with_logs))
    else:
        out = Out()
        envs = tl.envelopes
        slugs = sorted({e.get("slug") for e in envs if isinstance(e.get("slug"), str)})
        if tl.test_id:
            out.line(f"test {tl.test_id}  slug {','.join(slugs) or '-'}  {len(envs)} events", "bold")
        _verdict_lines(out, d)
        rows = list(_timeline_rows(tl.entries))
        if rows:
            out.table(_TIMELINE_COLUMNS, [r for r, _ in rows], [s for _, s in rows])
    if args.follow:
        return _follow(
            sources, lambda env: env["test_id"].startswith(tl.test_id or args.test_id), raw=False, as_json=args.json
        )
    return OK_EXIT


def _timeline_json(tl: correlate.Timeline, d: Any, with_logs: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "test_id": tl.test_id,
        "diagnosis": d.to_json() if d is not None else None,
        "events": tl.envelopes,
        "breadcrumbs": [e.data for e in tl.entries if e.kind == "breadcrumb"],
    }
    if with_logs:
        doc["logs"] = [{"source": e.source, "text": e.data} for e in tl.entries if e.kind == "log"]
    return doc


# -- grep -----------------------------------------------------------------------------


def _grep_filter(args: argparse.Namespace) -> Callable[[dict[str, Any]], bool]:
    import fnmatch

    def keep(env: dict[str, Any]) -> bool:
        if args.test_id and not env["test_id"].startswith(args.test_id):
            return False
        if args.slug and env.get("slug") != args.slug:
            return False
        if args.layer and env["layer"] != args.layer:
            return False
        if args.boundary and not (
            env["boundary"] == args.boundary or fnmatch.fnmatchcase(env["boundary"], args.boundary)
        ):
            return False
        if args.outcome and env["outcome"] != args.outcome:
            return False
        if args.since is not None or args.until is not None:
            return _in_window(ts_seconds(env["ts"]), args.since, args.until)
        return True

    return keep


def cmd_grep(args: argparse.Namespace) -> int:
    sources = _sources(args.paths)
    keep = _grep_filter(args)
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
    return OK_EXIT if found else NOTHING_EXIT


def _follow(sources: list[Source], keep: Callable[[dict[str, Any]], bool], *, raw: bool, as_json: bool) -> int:
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
            row, style = _timeline_row(correlate.Entry((0.0, 0, 0), "envelope", env, hit.source), 0.0)
            row[0] = env["ts"]
            out.line("  ".join(str(c) for c in row if c), style)
            out.stream.flush()


# -- stats ----------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    from cvdiag.read.stats import Stats

    sources = _sources(args.paths)
    tally, stats, progress = Tally(), Stats(), _progress(sources)
    for hit in read(sources, tally, progress=progress):
        if hit.kind == ENVELOPE:
            stats.add(hit.value)
    progress.close()
    _note(tally)
    boundaries, latency = stats.boundary_rows(), stats.latency_rows()
    if args.json:
        _json_out({"boundaries": boundaries, "latency": latency})
        return OK_EXIT if boundaries else NOTHING_EXIT
    out = Out()
    if not boundaries:
        out.line("no envelopes found")
        return NOTHING_EXIT
    cols = ["slug", "boundary", "count", "ok", "err", "timeout", "info"]
    out.table(
        [Column(c, keep=True, right=c not in ("slug", "boundary")) for c in cols],
        [[r[c] for c in cols] for r in boundaries],
        [FAIL if r["err"] or r["timeout"] else None for r in boundaries],
    )
    if latency:
        out.line()
        lcols = ["slug", "metric", "count", "p50", "p90", "p99", "max"]
        lrows = [[r["slug"], r["metric"], r["count"], *(ms(r[c]) for c in lcols[3:])] for r in latency]
        out.table([Column(c, keep=True, right=c not in ("slug", "metric")) for c in lcols], lrows)
    return OK_EXIT


# -- validate -------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from cvdiag.read.validate import problems as check

    sources = _sources(args.paths)
    tally = Tally()
    checked = invalid = 0
    found: list[dict[str, Any]] = []
    out = Out()
    for hit in read(sources, tally, with_lines=True):
        if hit.kind == BREADCRUMB:
            continue
        reasons = [hit.value] if hit.kind == MALFORMED else check(hit.value)
        checked += hit.kind == ENVELOPE
        if not reasons:
            continue
        invalid += hit.kind == ENVELOPE
        for reason in reasons:
            found.append({"source": hit.source, "line": hit.line, "reason": reason})
            if not args.json:
                out.line(f"{hit.source}:{hit.line}: {reason}", FAIL)
    summary = {"checked": checked, "invalid": invalid, "malformed": tally.count}
    if args.json:
        _json_out({**summary, "problems": found})
    else:
        style = FAIL if invalid or tally.count or not checked else OK
        out.line(f"checked {checked} envelopes: {invalid} invalid, {tally.count} malformed lines", style)
    return OK_EXIT if checked and not invalid and not tally.count else NOTHING_EXIT


# -- diagnose -------------------------------------------------------------------------


def cmd_diagnose(args: argparse.Namespace) -> int:
    try:
        import cvdiag.diagnosis  # noqa: F401 - only checks that diagnosis is installed
    except ImportError:
        print("cvdiag: diagnosis is not available in this install", file=sys.stderr)
        return NOTHING_EXIT
    if args.all:
        sources = _sources(args.args, spool_stdin=True)
        progress = _progress(sources)
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
        tl, sources = _resolve_timeline(test_id, paths, False)
        if tl.test_id is None:
            return _unknown_id(tl, test_id, sources)
        verdicts = [correlate.diagnose_timeline(tl, args.slow_s).to_json()]
    if args.json:
        _json_out(verdicts)
        return OK_EXIT if verdicts else NOTHING_EXIT
    out = Out()
    if not verdicts:
        out.line("no tests found")
        return NOTHING_EXIT
    if len(verdicts) == 1:
        v = verdicts[0]
        out.line(f"test {v['test_id']}", "bold")
        out.line(f"verdict: {v['class']} (confidence {v['confidence']:.2f})", OK if v["class"] == "ok" else FAIL)
        out.line(f"  {v['reason']}")
        return OK_EXIT
    rows = [[v["test_id"], v["class"], f"{v['confidence']:.2f}", v["reason"]] for v in verdicts]
    prefixes = unique_prefixes([v["test_id"] for v in verdicts])
    columns = [
        Column("test_id", keep=True, min_width=max(map(len, prefixes.values())) + 5, middle=True),
        Column("class", keep=True),
        Column("confidence", right=True, rank=1),
        Column("reason", keep=True, min_width=20),  # cut, not wrapped: `diagnose ID` says it whole
    ]
    out.table(columns, rows, [None if v["class"] == "ok" else FAIL for v in verdicts])
    return OK_EXIT


# -- compare --------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    from cvdiag.read.compare import compare

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
    result = compare(a.envelopes, b.envelopes, a_id=a.test_id, b_id=b.test_id)
    verdicts = [correlate.diagnose_timeline(tl, args.slow_s) for tl in found]
    if args.json:
        doc = result.to_json()
        for side, d in zip(("a", "b"), verdicts, strict=True):
            doc[side]["diagnosis"] = d.to_json() if d is not None else None
        _json_out(doc)
        return OK_EXIT
    _compare_out(Out(), result, verdicts)
    return OK_EXIT


def _compare_out(out: Out, result: Any, verdicts: list[Any]) -> None:
    for name, tid, d, total in (
        ("A", result.a_id, verdicts[0], result.a_duration_ms),
        ("B", result.b_id, verdicts[1], result.b_duration_ms),
    ):
        cls = d.cls if d is not None else "-"
        out.line(f"{name} {tid}  {cls}  {ms(total)}", "bold" if cls == "ok" else FAIL)
    first = result.divergence_index
    if first is None:
        out.line("no divergence: same boundaries, outcomes and timing", OK)
    else:
        out.prose(f"first divergence: {result.divergence}", FAIL)
    columns = [
        Column("", keep=True),
        Column("boundary", keep=True),
        Column("A t", right=True, rank=4),
        Column("A", keep=True, rank=1),
        Column("A dur", right=True, rank=2),
        Column("B t", right=True, rank=4),
        Column("B", keep=True, rank=1),
        Column("B dur", right=True, rank=2),
        Column("difference", rank=3, min_width=12),
    ]
    rows, styles = [], []
    for i, step in enumerate(result.steps):
        cells: list[Any] = [">" if i == first else "*" if step.differences else "", step.boundary]
        for side in (step.a, step.b):
            cells += [offset(side.offset_s), side.outcome_text, ms(side.duration_ms)] if side else ["", "-", ""]
        rows.append([*cells, "; ".join(step.differences)])
        styles.append(FAIL if i == first else WARN if step.differences and not step.minor else None)
    out.table(columns, rows, styles)


def cmd_report(args: argparse.Namespace) -> int:
    from cvdiag.face import report, report_data

    sources = _sources(args.paths, spool_stdin=True)  # read twice: tests, then events
    compared = None
    if args.compare:
        from cvdiag.read.compare import compare

        found = [correlate.timeline(sources, wanted.strip()) for wanted in args.compare]
        for tl, wanted in zip(found, args.compare, strict=True):
            if tl.test_id is None:
                return _unknown_id(tl, wanted, sources)
        compared = compare(found[0].envelopes, found[1].envelopes, a_id=found[0].test_id, b_id=found[1].test_id)
    progress = _progress(sources)
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
    size = report.write(doc, args.output, args.title)
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


def cmd_demo(argv: list[str]) -> int:
    try:
        from cvdiag.face.demo import main as demo_main  # type: ignore[attr-defined]
    except ImportError:
        print("cvdiag: demo not available", file=sys.stderr)
        return NOTHING_EXIT
    return int(demo_main(argv) or 0)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tests": cmd_tests,
    "timeline": cmd_timeline,
    "grep": cmd_grep,
    "stats": cmd_stats,
    "validate": cmd_validate,
    "diagnose": cmd_diagnose,
    "report": cmd_report,
    "compare": cmd_compare,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script and ``python -m cvdiag``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _terminated)
    if argv[:1] == ["demo"]:
        return _exit(lambda: cmd_demo(argv[1:]))
    parser = _parser()
    commands = _subparsers(parser)
    try:
        if argv and argv[0] in commands:
            # Intermixed, so options may follow paths: `cvdiag timeline ID app.log --with-logs`.
            args = commands[argv[0]].parse_intermixed_args(argv[1:])
            args.command = argv[0]
        else:
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage message
        return USAGE_EXIT if exc.code else OK_EXIT
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE_EXIT
    return _exit(lambda: _COMMANDS[args.command](args))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _exit(run: Callable[[], int | None]) -> int:
    try:
        return int(run() or 0)
    except UsageError as exc:
        _say(f"cvdiag: {exc}")
        return USAGE_EXIT
    except InputError as exc:
        _say(f"cvdiag: {exc}")
        return NOTHING_EXIT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cvdiag grep ... | head`: the reader left, nothing to say
        _silence_stdout()
        return OK_EXIT
    except OSError as exc:
        _say(f"cvdiag: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        return NOTHING_EXIT
    except Exception as exc:  # a bug must still not print a traceback at the user
        if os.environ.get("CVDIAG_TRACEBACK"):
            raise
        _say(f"cvdiag: internal error: {type(exc).__name__}: {exc} (set CVDIAG_TRACEBACK=1 for details)")
        return NOTHING_EXIT


def _terminated(signum: int, _frame: Any) -> None:
    """SIGTERM ends the command like Ctrl-C does: ``finally`` blocks and exit handlers
    run (a stdin spool is removed), instead of the process vanishing mid-write."""
    raise SystemExit(128 + signum)


def _silence_stdout() -> None:
    # Python flushes stdout at exit and would report the broken pipe again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
