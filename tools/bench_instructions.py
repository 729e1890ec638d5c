"""Instructions per request and per emit, counted by valgrind: repeatable numbers.

Wall-clock timings on a shared two-core machine move by tens of percent from run to
run; callgrind's instruction count does not (the same total twice, whatever else the
machine is doing). Each variant runs the in-process JSON request of
``tools/bench_middleware.py`` twice under callgrind, with few and with many requests,
and the difference divided by the extra requests is the cost of one request with
interpreter start-up and imports cancelled out. All threads are counted, so the
writer thread's share of an envelope is in. The SSE stream of ``bench_middleware.py``
(100 chunks) gives the cost of one streamed chunk: what a variant adds to a stream,
less what it adds to a JSON request, over the chunks.

Instructions convert to microseconds by the bare app's own rate, measured by wall clock
in the same run (outside valgrind): bare instructions per request over bare µs per request.

    python tools/bench_instructions.py [--few 200] [--many 1200]

Needs ``valgrind`` on PATH (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

VARIANTS = ("bare starlette", "pass-through wrapper", "cvdiag off", "cvdiag default", "cvdiag verbose")
#: Variants also measured on the SSE stream, for the cost of one streamed chunk.
STREAMED = ("bare starlette", "pass-through wrapper", "cvdiag default", "cvdiag verbose")
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
            for _ in range(count):
                cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 3}, outcome="ok")
        cvdiag.flush()
        return
    setup, app = bench.variant(variant)
    setup()
    asyncio.run(bench._round(app, path, count))
    cvdiag.flush()


def callgrind_total(*argv: str) -> int:
    """Instructions valgrind's callgrind counts for ``python argv...`` (all threads)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *argv]
    out = subprocess.run(command, capture_output=True, check=True)
    found = _COLLECTED.search(out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no total for {argv!r}: {out.stderr[-500:]!r}")
    return int(found.group(1))


def _instructions(variant: str, count: int, path: str = "/json") -> int:
    return callgrind_total(__file__, "--inside", variant, str(count), path)


def bare_microseconds(requests: int, rounds: int = 7) -> float:
    """Wall-clock µs of one bare JSON request (median of ``rounds``), outside valgrind."""
    bench = _bench()
    setup, app = bench.variant("bare starlette")
    setup()
    return statistics.median(asyncio.run(bench._round(app, "/json", requests)) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=200)
    parser.add_argument("--many", type=int, default=1200)
    parser.add_argument("--inside", nargs=3, metavar=("VARIANT", "COUNT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        _run_inside(args.inside[0], int(args.inside[1]), args.inside[2])
        return
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions needs valgrind on PATH")
    extra = args.many - args.few

    def per_request(variant: str, path: str = "/json") -> float:
        return (_instructions(variant, args.many, path) - _instructions(variant, args.few, path)) / extra

    per = {v: per_request(v) for v in (*VARIANTS, "one emit")}
    streamed = {v: per_request(v, "/sse") for v in STREAMED}
    bare = per["bare starlette"]
    rate = bare / bare_microseconds(args.many)  # instructions per µs of this machine, now
    print(f"instructions per JSON request (difference of {args.many} and {args.few} requests);")
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
