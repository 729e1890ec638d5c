"""The ``cvdiag`` command line: its options, and which command each one runs.

Exit codes: 0 found/ok, 1 nothing found or invalid input, 2 usage error, 3 internal
error (``_exit`` says how a failure becomes one). Errors are one line on stderr; a
traceback only under ``CVDIAG_TRACEBACK=1``. The commands themselves are in
``_commands``; heavy imports happen only in the command that needs them, so start-up
stays fast.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from collections.abc import Sequence

from cvdiag.face._commands import COMMANDS, TEST_ID_ATTR_HELP, when
from cvdiag.face._exit import OK_EXIT, USAGE_EXIT, exit_code, terminated
from cvdiag.read import correlate
from cvdiag.read.sources import reuse_block_memory

#: What ``-j`` sets: the command does one share itself and forks a worker for each other.
_JOBS_HELP = "processes that share the work: this one and JOBS - 1 forked workers"


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``cvdiag`` parser, and each command's own parser by name (kept as they are
    made: argparse offers no public way to find them again)."""
    p = argparse.ArgumentParser(
        prog="cvdiag",
        description="Find, correlate and explain CVDIAG lines in any log (files, directories, .gz, stdin).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, argparse.ArgumentParser] = {}

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        sp = commands[name] = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--json", action="store_true", help="machine output on stdout")
        return sp

    def paths(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("paths", nargs="*", metavar="PATH", help="files, directories, .gz, or - for stdin")
        sp.add_argument("--test-id-attr", metavar="KEY", help=TEST_ID_ATTR_HELP)

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
    sp.add_argument("-j", "--jobs", type=int, default=correlate.default_jobs(), help=_JOBS_HELP)
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
    sp.add_argument("-j", "--jobs", type=int, default=correlate.default_jobs(), help=_JOBS_HELP)
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
    sp.add_argument("--history", metavar="DB", help="add a page of the history in DB (a DuckDB file or postgresql://)")
    slow(sp)
    sp.add_argument("-j", "--jobs", type=int, default=correlate.default_jobs(), help=_JOBS_HELP)
    paths(sp)

    sp = command("diagnose", "name the root cause of a test's failure")
    sp.add_argument("--all", action="store_true", help="every test in the inputs")
    slow(sp)
    sp.add_argument("args", nargs="*", metavar="TEST_ID|PATH", help="TEST_ID then PATHs, or only PATHs with --all")
    sp.add_argument("--test-id-attr", metavar="KEY", help=TEST_ID_ATTR_HELP)

    sp = command("compare", "two tests side by side: events aligned by boundary, the first divergence")
    sp.add_argument("a", metavar="A", help="a test id or unique prefix (typically a passing run)")
    sp.add_argument("b", metavar="B", help="another test id or unique prefix (typically the failing run)")
    slow(sp)
    paths(sp)

    # Listed in the help only: `main` hands `demo` its arguments before any parsing.
    sub.add_parser("demo", help="run a bundled example app and show its diagnosis", add_help=False)
    sub.add_parser("history", help="test results across CI runs: add, runs, flaky, show, classes, diff", add_help=False)
    return p, commands


def no_full_collections() -> None:
    """The collector of a process that is ours keeps its young collections but never runs
    a full one. A command's rows, verdicts and events live until it ends and hold no
    cycles (a full collection after a whole share of a 1 GB log frees nothing): full
    collections only walked them again, 0.1-0.25 s of each process's pass. Workers
    forked from this process inherit it."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1 << 30)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script and ``python -m cvdiag``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, terminated)
    reuse_block_memory()  # this process is ours: big blocks are recycled, not mapped afresh
    no_full_collections()
    if argv[:1] == ["demo"]:  # the demo drives this very CLI: it is handed `main`, never imports it
        from cvdiag.face._demo import main as demo_main

        return exit_code(lambda: demo_main(argv[1:], cli=main))
    if argv[:1] == ["history"]:  # its own sub-commands: its own parser
        from cvdiag.face._history import main as history_main

        return history_main(argv[1:])
    parser, commands = _parser()
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
    return exit_code(lambda: COMMANDS[args.command](args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
