"""Instructions per request, per streamed chunk and per emit, counted by valgrind.

Wall-clock timings on a shared two-core machine move by tens of percent from run to
run; callgrind's instruction count does not (the same total twice, whatever else the
machine is doing). Each variant serves the in-process requests of
``tools/bench_middleware.py`` under callgrind; after a warm-up the program calls
``getppid``, where callgrind zeroes its counts (``--zero-before``), and leaves with
``os._exit`` after the last line is written, so the total is the measured loop alone,
start-up and imports out. All threads are counted, so the writer thread's share of an
envelope is in. The SSE stream (100 chunks) gives the cost of one streamed chunk: what
a variant adds to a stream, less what it adds to a JSON request, over the chunks.

Instructions convert to microseconds by the bare app's own rate, measured by wall clock
in the same run (outside valgrind): bare instructions per request over bare µs per request.

    python tools/bench_instructions.py [--requests 1000] [--jobs 2]

Needs ``valgrind`` on PATH (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

VARIANTS = ("bare starlette", "pass-through wrapper", "cvdiag off", "cvdiag default", "cvdiag verbose")
#: Variants also measured on the SSE stream, for the cost of one streamed chunk.
STREAMED = ("bare starlette", "pass-through wrapper", "cvdiag default", "cvdiag verbose")
#: Requests (or emits) served before counting starts.
_WARM_UP = 50
_COLLECTED = re.compile(rb"Collected\s*:\s*(\d+)")


def _bench() -> Any:
    """``tools/bench_middleware.py``, whose apps and request loop are measured here."""
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_middleware

    return bench_middleware


def _run_inside(variant: str, count: int, path: str) -> None:
    """The measured program: ``count`` requests to ``path`` (or emits) of one variant."""
    bench = _bench()

    import cvdiag

    if variant == "one emit":
        cvdiag.configure(enabled=True, tier="default", environ={}, stdout=False, file="/dev/null")
        with cvdiag.request_context(test_id="bench-1", slug="bench"):

            def loop(n: int) -> None:
                for _ in range(n):
                    cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 3}, outcome="ok")

            _measured(loop, count)
        return
    setup, app = bench.variant(variant)
    setup()
    _measured(lambda n: asyncio.run(bench._round(app, path, n)), count)


def _measured(loop: Callable[[int], object], count: int) -> None:
    """Warm up, mark the start for callgrind, run ``count``, write everything, leave."""
    import cvdiag

    loop(_WARM_UP)
    cvdiag.flush()
    os.getppid()  # callgrind --zero-before=getppid: counting starts here
    loop(count)
    cvdiag.flush()
    os._exit(0)  # no interpreter teardown in the count


def callgrind_total(*argv: str) -> int:
    """Instructions callgrind counts for ``python argv...`` (all threads) after its last ``getppid``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--zero-before=getppid",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        *argv,
    ]
    out = subprocess.run(command, capture_output=True, check=True)
    found = _COLLECTED.search(out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no total for {argv!r}: {out.stderr[-500:]!r}")
    return int(found.group(1))


def _per_request(job: tuple[str, str, int]) -> float:
    variant, path, count = job
    return callgrind_total(__file__, "--inside", variant, str(count), path) / count


def bare_microseconds(requests: int, rounds: int = 7) -> float:
    """Wall-clock µs of one bare JSON request (median of ``rounds``), outside valgrind."""
    bench = _bench()
    setup, app = bench.variant("bare starlette")
    setup()
    return statistics.median(asyncio.run(bench._round(app, "/json", requests)) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2, help="valgrind runs at a time")
    parser.add_argument("--inside", nargs=3, metavar=("VARIANT", "COUNT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        _run_inside(args.inside[0], int(args.inside[1]), args.inside[2])
        return
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions needs valgrind on PATH")
    n = args.requests
    jobs = [(v, "/json", n) for v in (*VARIANTS, "one emit")] + [(v, "/sse", n // 5) for v in STREAMED]
    with ThreadPoolExecutor(args.jobs) as pool:
        counted = dict(zip(jobs, pool.map(_per_request, jobs), strict=True))
    per = {v: counted[v, "/json", n] for v in (*VARIANTS, "one emit")}
    streamed = {v: counted[v, "/sse", n // 5] for v in STREAMED}
    bare = per["bare starlette"]
    rate = bare / bare_microseconds(n)  # instructions per µs of this machine, now
    print(f"instructions per JSON request ({n} requests; streams: {n // 5})")
    print(f"µs at the bare app's rate in this run: {rate:,.0f} instructions per µs")
    print("| variant | per request | added to bare | added, µs |")
    print("|---|---|---|---|")
    for variant in VARIANTS:
        added = per[variant] - bare
        print(f"| {variant} | {per[variant]:,.0f} | {added:+,.0f} | {added / rate:+.1f} |")
    print(f"| one `emit` (backend.agent.exit, default tier), for scale | {per['one emit']:,.0f} | | |")
    chunks = _bench().CHUNKS
    print()
    print(f"per streamed chunk (SSE, {chunks} chunks: added to a stream less added to a JSON request)")
    print("| variant | per stream | added per chunk | added per chunk, µs |")
    print("|---|---|---|---|")
    for variant in STREAMED:
        chunk = ((streamed[variant] - streamed["bare starlette"]) - (per[variant] - bare)) / chunks
        print(f"| {variant} | {streamed[variant]:,.0f} | {chunk:+,.0f} | {chunk / rate:+.2f} |")


if __name__ == "__main__":
    main()
