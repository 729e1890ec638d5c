"""Worker processes of ``tests``, ``stats``, ``diagnose --all`` and ``report``: what each
share reads and reads again, their collectors, and stopping them can never hang the command."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logkit import compact, happy, write

from cvdiag.read import sources
from cvdiag.read.sources import resolve_sources
from cvdiag.read.split import Share, run_parts


def _dies_on_sigterm(_: int) -> bool:
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and not _sigterm_blocked()


def _sigterm_blocked() -> bool:
    return signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_workers_die_on_sigterm_whatever_handler_the_command_installed() -> None:
    # The CLI turns SIGTERM into SystemExit; a worker that inherits that handler can miss
    # the pool's SIGTERM while it blocks on the task lock, and the command never ends.
    # The first share is the driver's own, under the command's handler.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        assert run_parts(_dies_on_sigterm, [0, 1, 2], 3) == [False, True, True]
        assert not _sigterm_blocked()  # the driver's mask as it was
    finally:
        signal.signal(signal.SIGTERM, previous)


def _where(share: int) -> tuple[int, int]:
    return share, os.getpid()


def test_the_first_share_is_done_in_the_calling_process_each_other_in_a_forked_one() -> None:
    """The first share's result is neither pickled nor sent: the driver does it itself,
    while ``jobs`` - 1 workers do the others; results come in the shares' order."""
    results = run_parts(_where, [0, 1, 2], 3)
    assert [share for share, _ in results] == [0, 1, 2]
    pids = [pid for _, pid in results]
    assert pids[0] == os.getpid() and os.getpid() not in pids[1:]  # a worker may take both
    assert run_parts(_where, [5], 2) == [(5, os.getpid())]  # one share: no worker at all


def _fails_or_finishes_late(share: tuple[int, str]) -> bool:
    part, marker = share
    if part == 0:
        raise ValueError("the driver's share")
    time.sleep(20)
    Path(marker).write_text("finished")  # only a worker left to finish gets here
    return True


def test_a_failed_first_share_stops_the_workers_at_once(tmp_path: Path) -> None:
    """The driver's own share failing ends the command now: the workers still at work are
    terminated, not waited for."""
    marker = tmp_path / "finished"
    with pytest.raises(ValueError, match="the driver's share"):
        run_parts(_fails_or_finishes_late, [(0, str(marker)), (1, str(marker))], 2)
    time.sleep(0.5)
    assert not marker.exists()


_SLOW_SECOND_WORKER = """
import os, signal, time
from cvdiag.face._exit import terminated
from cvdiag.read import split

signal.signal(signal.SIGTERM, terminated)  # the command's own, as a worker inherits it
forks = []
# the second worker of each pool is slow to start: Python's after-fork code still runs
os.register_at_fork(before=lambda: forks.append(1), after_in_child=lambda: len(forks) % 2 or time.sleep(0.2))


def fails(_):
    raise ValueError("boom")


for _ in range(5):
    try:
        split.run_parts(fails, [0, 1], 2)
    except ValueError:
        pass
print("ended")
"""


def test_a_failed_share_stops_a_worker_the_pools_sigterm_reaches_as_it_starts() -> None:
    """One worker fails at once, so the pool is terminated while the other is still in
    Python's after-fork code. A SIGTERM handled there is ignored (its ``SystemExit``
    with it), and the worker, alive, waited for the pool's task lock forever: the
    command hung. Forked with SIGTERM blocked, the worker gets it once it can act on it."""
    r = subprocess.run(
        [sys.executable, "-c", _SLOW_SECOND_WORKER], capture_output=True, text=True, timeout=60, check=False
    )
    assert (r.returncode, r.stdout, "Exception ignored" in r.stderr) == (0, "ended\n", False), r.stderr[-2000:]


def _collects(_: int) -> bool:
    return gc.isenabled()


def _fails(_: int) -> bool:
    raise ValueError("boom")


def test_the_collector_is_paused_only_in_the_driver_and_only_while_results_come_in() -> None:
    """The driver takes the results in with its collector off; the workers collect, the
    driver's own share runs with its collector as it is, and the driver's collector is as
    it was afterwards, whatever happened."""
    assert gc.isenabled()
    assert run_parts(_collects, [0, 1], 2) == [True, True]
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"):
        run_parts(_fails, [0, 1], 2)
    assert gc.isenabled()
    gc.disable()
    try:
        # a host that turned it off keeps it off, in the share it does itself too
        assert run_parts(_collects, [0, 1], 2) == [False, True]
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Unpickled:
    """A worker's result that notes whether the driver's collector ran as it was unpickled."""

    def __init__(self) -> None:
        self.collector_on: bool | None = None

    def __setstate__(self, state: dict) -> None:
        self.collector_on = gc.isenabled()


def _slow_first(share: int) -> _Unpickled | None:
    if share == 0:  # the driver's own: the worker's result is in long before it is done
        time.sleep(1.0)
        return None
    return _Unpickled()


def test_a_workers_result_is_unpickled_once_the_driver_is_done_with_its_collector_paused() -> None:
    """Not on the pool's thread as it arrives, beside the driver's own share (whose
    collector stays on): after it, with the collector off."""
    assert gc.isenabled()
    mine, theirs = run_parts(_slow_first, [0, 1], 2)
    assert mine is None and theirs.collector_on is False
    assert gc.isenabled()


_FROZEN = """
import gc, sys
from cvdiag.read.split import run_parts
from cvdiag.read.sources import reuse_block_memory
if sys.argv[1] == "cli":
    reuse_block_memory()
shares = [range(3), range(4)][: int(sys.argv[2])]
before = gc.get_freeze_count()
results = run_parts(list, shares, len(shares))
print(gc.get_freeze_count() - before >= len(results) + 2, gc.isenabled())
"""


@pytest.mark.parametrize("shares", [1, 2])
@pytest.mark.parametrize(("process", "frozen"), [("cli", "True"), ("library", "False")])
def test_the_results_a_cli_takes_in_are_frozen_a_library_callers_are_not(
    process: str, frozen: str, shares: int
) -> None:
    """The CLI's own process freezes what its shares made, its own included and with one
    share alone (the collector never walks those rows again: they live until the command
    ends); a host that calls the read side keeps its collector as it was."""
    r = subprocess.run(
        [sys.executable, "-c", _FROZEN, process, str(shares)], capture_output=True, text=True, timeout=60, check=False
    )
    assert (r.returncode, r.stdout) == (0, f"{frozen} True\n"), r.stderr[-2000:]


@given(
    lines=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    parts=st.integers(1, 3),
    by_range=st.booleans(),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_share_numbers_lines_and_buffers_as_one_reading_does(
    lines: list[int], parts: int, by_range: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever part of a buffer a share reads (half of it, all of it, none of it: a
    buffer of one line cannot be halved), the line number and the number it gives the
    buffer are those of reading the inputs from their start; a stretch takes whole
    buffers, each in exactly one share, in order."""
    logs = []
    for n, half in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        path = tmp_path / f"{n}.log"
        path.write_bytes(b"".join(b"x" * length + b"\n" for length in half))
        logs.append(str(path))
    monkeypatch.setattr(sources, "_FILE_BLOCK", 200)  # many buffers, some of one long line
    whole = [
        (buf, name, base, block)
        for buf, name, _, _, base, block in Share(resolve_sources(logs)).windows(by_range=False)
    ]
    numbered = {block: (name, base) for _, name, base, block in whole}
    for part in range(parts):
        share = Share(resolve_sources(logs), part, parts)
        for buf, name, _, _, base, block in share.windows(by_range=by_range):
            assert numbered[block] == (name, base) and whole[block][0] == buf
    stretches = [list(Share(resolve_sources(logs), k, parts).stretch()) for k in range(parts)]
    assert [item for stretch in stretches for item in stretch] == [(buf, name, base) for buf, name, base, _ in whole]


@given(
    lines=st.lists(st.integers(0, 700), min_size=1, max_size=40),
    pick=st.data(),
    gap=st.sampled_from([0, 100, 16 << 10]),
    last_newline=st.booleans(),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_lines_a_share_saw_are_read_again_as_it_saw_them(
    lines: list[int],
    pick: st.DataObject,
    gap: int,
    last_newline: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any lines a share read, read again by their places (block, start, end): where the
    file holds them, some in one read, some in several; or, past a line too long to keep
    (a placeholder stands for it, so the blocks are not the file's bytes), from the blocks
    read again. Either way the same bytes, in file order, the last line of a file without
    its newline too."""
    logs = []
    for n, half in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        path = tmp_path / f"{n}.log"
        data = b"".join(bytes([97 + k % 26]) * length + b"\n" for k, length in enumerate(half))
        path.write_bytes(data if last_newline else data[:-1])
        logs.append(str(path))
    monkeypatch.setattr(sources, "_FILE_BLOCK", 200)
    monkeypatch.setattr(sources, "MAX_LINE", 500)  # lines of 501 bytes and more are left out
    monkeypatch.setattr(sources, "_RUN_GAP", gap)
    monkeypatch.setattr(sources, "_RUN_MAX", 300)
    share = Share(resolve_sources(logs))
    seen = {}
    for buf, _, a, b, _, block in share.windows(by_range=False):
        while a < b:
            end = buf.find(b"\n", a, b)
            end = b if end < 0 else end
            seen[block, a, end] = bytes(buf[a:end])
            a = end + 1
    chosen = pick.draw(st.lists(st.sampled_from(sorted(seen)), unique=True)) if seen else []  # empty files
    places: dict[int, list] = {}
    for block, ls, le in reversed(chosen):  # in any order
        places.setdefault(block, []).append((ls, le, (block, ls, le)))

    read = [
        (tag, bytes(buf[ls - shift : le - shift]))
        for buf, shift, lines in share.lines_at(places)
        for ls, le, tag in lines
    ]

    assert read == [(place, seen[place]) for place in sorted(chosen)]


@pytest.mark.parametrize("command", [["tests", "-j1"], ["report", "-j1", "-o", "-"], ["stats"]])
def test_a_command_collects_young_cycles_but_never_runs_a_full_collection(tmp_path: Path, command: list[str]) -> None:
    """The CLI's process is its own: its collector keeps the young collections it had
    (made frequent here, so a few tests are enough) and runs no full one."""
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for i in range(200) for e in happy(f"t-{i}", start=i)])
    code = (
        "import gc, json, sys\n"
        "from cvdiag.face import cli\n"
        "gc.set_threshold(10, 2, 2)\n"
        "before = [s['collections'] for s in gc.get_stats()]\n"
        "cli.main(sys.argv[1:])\n"
        "after = [s['collections'] for s in gc.get_stats()]\n"
        "print(json.dumps([gc.get_threshold(), [a - b for a, b in zip(after, before)]]), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *command, str(log)], capture_output=True, text=True, timeout=120, check=True
    )
    threshold, (young, middle, full) = json.loads(proc.stderr.splitlines()[-1])
    assert threshold[:2] == [10, 2]  # the young ones as they were
    assert young > 100 and middle > 10 and full == 0
