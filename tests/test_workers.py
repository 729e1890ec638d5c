"""Worker processes of ``tests`` and ``diagnose --all``: stopping them can never hang the command."""

from __future__ import annotations

import signal

from cvdiag.read.split import run_parts


def _dies_on_sigterm(_: int) -> bool:
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_workers_die_on_sigterm_whatever_handler_the_command_installed() -> None:
    # The CLI turns SIGTERM into SystemExit; a worker that inherits that handler can miss
    # the pool's SIGTERM while it blocks on the task lock, and the command never ends.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        assert run_parts(_dies_on_sigterm, [0, 1], 2) == [True, True]
    finally:
        signal.signal(signal.SIGTERM, previous)
