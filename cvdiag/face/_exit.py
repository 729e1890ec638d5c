"""How a command's end becomes an exit code and, at most, one line on stderr.

0 found/ok, 1 nothing found or invalid input, 2 usage error, 3 internal error (a bug
in cvdiag: one line, and its traceback under ``CVDIAG_TRACEBACK=1``), 4 tests failed
(only when asked: ``tests --fail-on-failed``, for a CI step). Keeping "a bug"
apart from "nothing found" is what lets scripts and tests tell a crash from an answer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from cvdiag.face.render import printable
from cvdiag.read.sources import InputError

OK_EXIT, NOTHING_EXIT, USAGE_EXIT, INTERNAL_EXIT = 0, 1, 2, 3
INTERRUPTED_EXIT = 130
#: ``tests --fail-on-failed`` found a failed test: an answer, kept apart from the others.
FAILED_EXIT = 4
TRACEBACK_ENV = "CVDIAG_TRACEBACK"


class UsageError(Exception):
    """Bad arguments found after parsing (exit 2)."""


def say(text: str) -> None:
    """A note or error on stderr; log content in it (file names, ids) is shown, not obeyed."""
    print(printable(text), file=sys.stderr)


def exit_code(run: Callable[[], int | None]) -> int:
    """Run a command and give its exit code; every failure gets its own code and one line."""
    try:
        return int(run() or 0)
    except UsageError as exc:
        say(f"cvdiag: {exc}")
        return USAGE_EXIT
    except InputError as exc:
        say(f"cvdiag: {exc}")
        return NOTHING_EXIT
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    except BrokenPipeError:  # `cvdiag grep ... | head`: the reader left, nothing to say
        _silence_stdout()
        return OK_EXIT
    except OSError as exc:
        say(f"cvdiag: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        return NOTHING_EXIT
    except Exception as exc:  # a bug: never a traceback at the user unless asked for
        _internal_error(exc)
        return INTERNAL_EXIT


def _internal_error(exc: Exception) -> None:
    summary = f"cvdiag: internal error: {type(exc).__name__}: {exc}"
    if not os.environ.get(TRACEBACK_ENV):
        say(f"{summary} (set {TRACEBACK_ENV}=1 for details)")
        return
    import traceback  # only here: start-up stays fast

    for line in "".join(traceback.format_exception(exc)).splitlines():
        say(line)  # the message may quote log content: escaped like any other note
    say(summary)


def terminated(signum: int, _frame: Any) -> None:
    """SIGTERM ends the command like Ctrl-C does: ``finally`` blocks and exit handlers
    run (a stdin spool is removed), instead of the process vanishing mid-write."""
    raise SystemExit(128 + signum)


def _silence_stdout() -> None:
    # Python flushes stdout at exit and would report the broken pipe again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
