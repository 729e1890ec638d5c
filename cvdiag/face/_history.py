"""``cvdiag history``: record runs, and ask the history about them.

Its own parser (argparse cannot parse a command's sub-commands intermixed), handed its
arguments by ``cli.main`` as ``demo`` is. Each sub-command opens the store, asks
``cvdiag.history.queries``, and shows the answer (``_history_views``) or ``--json``.
A missing extra is a usage error (exit 2) that names the extra; a database that cannot
answer is one line and exit 1 (``HistoryError`` is an ``InputError``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cvdiag.contract.timestamps import seconds_ns, wire_ts
from cvdiag.face import _history_views as views
from cvdiag.face._commands import TEST_ID_ATTR_HELP, _json_out, _note, _sources, open_history, when
from cvdiag.face._exit import NOTHING_EXIT, OK_EXIT, USAGE_EXIT, UsageError, exit_code
from cvdiag.face.render import Out
from cvdiag.history.queries import DEFAULT_WINDOW
from cvdiag.history.store import Store
from cvdiag.read.sources import InputError


def _asked(args: argparse.Namespace, ask: Callable[[Store], Any]) -> Any:
    store = open_history(args.db)
    try:
        return ask(store)
    finally:
        store.close()


def add(args: argparse.Namespace) -> int:
    from cvdiag.history import record, recording

    try:
        name_of = record.namer(args.name_pattern)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.kept:
        if args.paths:
            raise UsageError("--kept records the runs kept from before, and takes no logs")
        return _add_kept(args)
    sources = _sources(args.paths, spool_stdin=True, test_id_attr=args.test_id_attr)  # read twice
    results, tally = record.tests_of(sources, "", name_of=name_of, slow_s=args.slow_s)
    if tally.untracked:  # before the notes: "left out" is not what happens here
        raise InputError(
            f"the inputs hold more than {tally.untracked_limit:,} test ids, more than one pass reads: a run is "
            f"recorded whole or not at all, so nothing was recorded (add the logs of one run at a time, or raise "
            "CVDIAG_MAX_TESTS)"
        )
    _note(tally)
    if not results:
        print("cvdiag: no tests found in the inputs; nothing recorded", file=sys.stderr)
        return NOTHING_EXIT
    info = record.described(record.RunInfo(args.run_id, args.commit, args.branch, args.job_url), os.environ)
    run, results = record.make_run(info, results, wire_ts(seconds_ns(args.started)) if args.started else None)
    done = _recorded(lambda: recording.record(args.db, run, results))
    summary = {"run_id": done.run_id, "added": done.added, "tests": run.tests, "failed": run.failed,
               "db": done.where, "earlier": done.earlier}  # fmt: skip
    if args.json:
        _json_out(summary)
    else:
        views.recorded(Out(), summary, done)
    return OK_EXIT


def _add_kept(args: argparse.Namespace) -> int:
    from cvdiag.history import places, recording

    done = _recorded(lambda: recording.record_kept(args.db))
    if args.json:
        _json_out({"db": done.where if done else None, "earlier": done.earlier if done else []})
    elif done:
        views.recorded(Out(), None, done)
    else:
        Out().line(f"no runs are kept for this history (in {places.kept_folder(args.db)})")
    return OK_EXIT


def _recorded(write: Callable[[], Any]) -> Any:
    """A write, with a missing extra as a usage error that names it."""
    from cvdiag.history.store import MissingExtra

    try:
        return write()
    except MissingExtra as exc:
        raise UsageError(str(exc)) from None


def runs(args: argparse.Namespace) -> int:
    from cvdiag.history import queries

    rows = _asked(args, lambda s: queries.runs(s, args.limit))
    if args.json:
        _json_out(rows)
    elif rows:
        views.runs(Out(), rows)
    else:
        Out().line("the history holds no runs")
    return OK_EXIT if rows else NOTHING_EXIT


def flaky(args: argparse.Namespace) -> int:
    from cvdiag.history import queries

    rows = _asked(args, lambda s: queries.flaky(s, args.runs, args.limit))
    if args.json:
        _json_out(rows)
    elif rows:
        views.flaky(Out(), rows, args.runs)
    else:
        Out().line(f"no flaky tests in the last {args.runs} runs")
    return OK_EXIT  # none is an answer too: a CI step that asks must not fail on good news


def show(args: argparse.Namespace) -> int:
    from cvdiag.history import queries

    doc = _asked(args, lambda s: queries.show(s, args.name, args.limit))
    if args.json:
        _json_out(doc)
    else:
        views.show(Out(), doc)
    return OK_EXIT


def classes(args: argparse.Namespace) -> int:
    from cvdiag.history import queries

    since = wire_ts(seconds_ns(args.since)) if args.since is not None else None
    rows = _asked(args, lambda s: queries.classes(s, since, args.by))
    if args.json:
        _json_out(rows)
    elif rows:
        views.classes(Out(), rows, args.by)
    else:
        Out().line("no failures in the history" + (" since then" if since else ""))
    return OK_EXIT if rows else NOTHING_EXIT


def diff(args: argparse.Namespace) -> int:
    from cvdiag.history import queries

    doc = _asked(args, lambda s: queries.diff(s, args.a, args.b, slower=args.slower, min_ms=args.min_ms))
    if args.json:
        _json_out(doc)
    else:
        views.diff(Out(), doc)
    return OK_EXIT


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``history`` parser, and each sub-command's own by name."""
    p = argparse.ArgumentParser(
        prog="cvdiag history",
        description="Test results across CI runs, in DuckDB (a file, the default) or PostgreSQL.",
    )
    sub = p.add_subparsers(dest="sub", metavar="COMMAND", required=True)
    commands: dict[str, argparse.ArgumentParser] = {}

    def command(name: str, help_: str, run: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        sp = commands[name] = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(run=run)
        sp.add_argument(
            "--db",
            metavar="URL",
            help="a DuckDB file or postgresql://user@host/db (default: $CVDIAG_HISTORY, else .cvdiag/history.duckdb)",
        )
        sp.add_argument("--json", action="store_true", help="machine output on stdout")
        return sp

    sp = command("add", "record one run: a row per test of the logs, with its class and reason", add)
    sp.add_argument("paths", nargs="*", metavar="LOG", help="files, directories, .gz, or - for stdin")
    sp.add_argument("--test-id-attr", metavar="KEY", help=TEST_ID_ATTR_HELP)
    sp.add_argument("--run-id", help="the run's id (default: from the CI, $CVDIAG_RUN_ID, else from the logs)")
    sp.add_argument("--commit", help="the commit tested (default: from the CI, else git)")
    sp.add_argument("--branch", help="the branch (default: from the CI, else git)")
    sp.add_argument("--job-url", help="a link to the CI job (default: from the CI)")
    sp.add_argument("--started", type=when, metavar="T", help="when the run started (default: its first event)")
    sp.add_argument(
        "--name-pattern",
        metavar="REGEX",
        help="name tests by REGEX's first group in the test id (to drop a run-specific part); "
        "default: the pytest node id of --cvdiag-emit-probe lines, else the test id",
    )
    sp.add_argument("--slow-s", type=float, default=30.0, metavar="S", help="LLM slow threshold (default 30)")
    sp.add_argument(
        "--kept",
        action="store_true",
        help="record only the runs kept because the history could not be written then (every add records them too)",
    )

    sp = command("runs", "the runs recorded, newest first", runs)
    sp.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")

    sp = command("flaky", "tests that both passed and failed in the last runs, and the classes behind it", flaky)
    sp.add_argument("--runs", type=int, default=DEFAULT_WINDOW, metavar="N", help="the last N runs (default 100)")
    sp.add_argument("--limit", type=int, default=50, help="at most this many tests (default 50)")

    sp = command("show", "one test: a row per run (when, commit, status, class, reason)", show)
    sp.add_argument("name", metavar="NAME", help="a test's name, or a part of it that only one name has")
    sp.add_argument("--limit", type=int, default=100, help="at most this many runs (default 100)")

    sp = command("classes", "failures per class over time", classes)
    sp.add_argument("--since", type=when, metavar="T", help="from this time (RFC 3339, date, or 30d ago)")
    sp.add_argument("--by", choices=("day", "week"), default="day", help="one row per day (default) or week")

    sp = command("diff", "two runs: new failures, fixed, changed class, slower", diff)
    sp.add_argument("a", metavar="RUN_A", help="a run id, a unique prefix, latest or latest~N")
    sp.add_argument("b", metavar="RUN_B", help="the run to compare with RUN_A")
    sp.add_argument("--slower", type=float, default=1.5, metavar="X", help="slower: X times RUN_A's duration")
    sp.add_argument("--min-ms", type=float, default=100.0, metavar="MS", help="... and at least MS more (100)")
    return p, commands


def main(argv: Sequence[str]) -> int:
    """``cvdiag history ARGS``: parse, run, and give the exit code."""
    parser, commands = _parser()
    try:
        if argv and argv[0] in commands:  # intermixed: options may follow the logs
            args = commands[argv[0]].parse_intermixed_args(list(argv[1:]))
        else:
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return USAGE_EXIT if exc.code else OK_EXIT
    return exit_code(lambda: args.run(args))
