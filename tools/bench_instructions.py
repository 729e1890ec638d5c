"""Instructions per request and per emit, counted by valgrind: repeatable numbers.

Wall-clock timings on a shared two-core machine move by tens of percent from run to
run; callgrind's instruction count does not (the same total twice, whatever else the
machine is doing). Each variant runs the in-process JSON request of
``tools/bench_middleware.py`` twice under callgrind, with few and with many requests,
and the difference divided by the extra requests is the cost of one request with
interpreter start-up and imports cancelled out. All threads are counted, so the
writer thread's share of an envelope is in.

    python tools/bench_instructions.py [--few 200] [--many 1200]

Needs ``valgrind`` on PATH (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
from pathlib import Path

VARIANTS = ("bare starlette", "pass-through wrapper", "cvdiag off", "cvdiag default", "cvdiag verbose")
_COLLECTED = re.compile(rb"Collected\s*:\s*(\d+)")


def _run_inside(variant: str, count: int) -> None:
    """The measured program: ``count`` requests (or emits) of one variant."""
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_middleware as bench

    import cvdiag

    if variant == "one emit":
        cvdiag.configure(enabled=True, tier="default", environ={}, stdout=False, file="/dev/null")
        with cvdiag.request_context(test_id="bench-1", slug="bench"):
            for _ in range(count):
                cvdiag.emit("backend.agent.exit", {"terminal_outcome": "ok", "total_duration_ms": 3}, outcome="ok")
        cvdiag.flush()
        return
    setup, app = bench.variants()[variant]
    setup()
    asyncio.run(bench._round(app, "/json", count))
    cvdiag.flush()


def callgrind_total(*argv: str) -> int:
    """Instructions valgrind's callgrind counts for ``python argv...`` (all threads)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *argv]
    out = subprocess.run(command, capture_output=True, check=True)
    found = _COLLECTED.search(out.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no total for {argv!r}: {out.stderr[-500:]!r}")
    return int(found.group(1))


def _instructions(variant: str, count: int) -> int:
    return callgrind_total(__file__, "--inside", variant, str(count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few", type=int, default=200)
    parser.add_argument("--many", type=int, default=1200)
    parser.add_argument("--inside", nargs=2, metavar=("VARIANT", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        _run_inside(args.inside[0], int(args.inside[1]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions needs valgrind on PATH")
    extra = args.many - args.few
    per = {v: (_instructions(v, args.many) - _instructions(v, args.few)) / extra for v in (*VARIANTS, "one emit")}
    bare = per["bare starlette"]
    print(f"instructions per JSON request (difference of {args.many} and {args.few} requests)")
    print("| variant | per request | added to bare |")
    print("|---|---|---|")
    for variant in VARIANTS:
        print(f"| {variant} | {per[variant]:,.0f} | {per[variant] - bare:+,.0f} |")
    print(f"| one `emit` (backend.agent.exit, default tier), for scale | {per['one emit']:,.0f} | |")


if __name__ == "__main__":
    main()
