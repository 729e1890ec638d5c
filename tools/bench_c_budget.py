"""What each compiled part buys today, in instructions (the C budget of docs/architecture.md).

Each part is measured twice under callgrind on the same input, once as built and once
with that one part replaced by its Python twin (or, for the SSE2 compares, by the byte
loops of a build with ``-DCVDIAG_NO_SSE2``); only the measured section is counted
(``tools/bench_instructions.py``'s ``getppid`` mark). The ratio is what the part saves
where it runs: a part that buys a few percent is a candidate to retire.

    python tools/make_big_log.py /tmp/cvdiag-budget.log --mb 2
    python tools/bench_c_budget.py /tmp/cvdiag-budget.log [--no-sse2-build DIR]

``DIR``: a copy of the tree built with ``CVDIAG_CFLAGS=-DCVDIAG_NO_SSE2`` (as
``tools/ci_compiled.sh`` makes one). Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools")]

from bench_instructions import callgrind_total  # noqa: E402

#: (part, its Python twin, what runs, how the twin is put in its place)
PARTS: dict[str, tuple[str, str, str]] = {
    "Folder.buffer (tests --no-class)": ("fold.Fold.buffer", "rows", "fold"),
    "Folder.buffer + take (tests, diagnose --all)": ("fold.Fold.buffer, Evidence.add", "diagnose", "fold"),
    "Folder.buffer, count mode (stats)": ("count.py over scan.hits", "stats", "fold"),
    "Folder.events_at (report's events)": ("report_data._encode", "report", "events"),
    "newlines (line numbers)": ("bytes.count", "newlines", "newlines"),
    "_cemit.line (one emit)": ("emitter._steps", "emit", "line"),
}

_PROGRAM = r"""
import os, sys
sys.path.insert(0, {root!r})
from cvdiag.read import fold, scan, count, _diagnosing, correlate
from cvdiag.read.sources import resolve_sources
from cvdiag.face import report_data
work, twin, log = {work!r}, {twin!r}, {log!r}
if twin == "fold":
    fold._CFOLD = None
elif twin == "events":
    report_data._plain_events = lambda: None
elif twin == "newlines":
    scan._CFOLD = None
data = open(log, "rb").read()

def run():
    if work == "rows":
        f = fold.Fold(); f.buffer(data, log); f.finish()
    elif work == "diagnose":
        from cvdiag.diagnosis import Evidence
        f = fold.Fold(Evidence); f.buffer(data, log); f.finish()
    elif work == "stats":
        from cvdiag.read.parsing import Tally
        count.collect(resolve_sources([log]), Tally())
    elif work == "report":
        report_data.build(resolve_sources([log]), all_tests=True)
    elif work == "newlines":
        for _ in range(20):
            scan.newlines(data)

run()
os.getppid()
run()
os._exit(0)
"""

_EMIT = r"""
import os, sys
sys.path.insert(0, {root!r})
import cvdiag
from cvdiag.write import emitter
if {twin!r} == "line":
    emitter._line_compiled = None
cvdiag.configure(enabled=True, tier="default", environ={{}}, stdout=False, file="/dev/null")
with cvdiag.request_context(test_id="bench-1", slug="bench"):
    def loop(n):
        for _ in range(n):
            cvdiag.emit("backend.agent.exit", {{"terminal_outcome": "ok", "total_duration_ms": 3}}, outcome="ok")
    loop(50); cvdiag.flush()
    os.getppid()
    loop(2000); cvdiag.flush()
    os._exit(0)
"""


def measure(work: str, twin: str, log: str, root: Path = ROOT) -> int:
    if work == "emit":
        program = _EMIT.format(root=str(root), twin=twin)
    else:
        program = _PROGRAM.format(root=str(root), work=work, twin=twin, log=log)
    return callgrind_total("-c", program)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--no-sse2-build", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    os.environ.pop("CVDIAG_COMPILED", None)
    jobs = []
    for part, (_, work, twin) in PARTS.items():
        jobs.append((part, work, "", ROOT))
        jobs.append((part, work, twin, ROOT))
    if args.no_sse2_build is not None:
        for part in ("Folder.buffer (tests --no-class)", "Folder.buffer + take (tests, diagnose --all)"):
            jobs.append((part + " [SSE2 off]", PARTS[part][1], "", args.no_sse2_build))
    with ThreadPoolExecutor(args.jobs) as pool:
        totals = list(pool.map(lambda j: measure(j[1], j[2], args.log, j[3]), jobs))
    got = {(j[0], j[2], str(j[3])): t for j, t in zip(jobs, totals, strict=True)}
    print(f"{'part':48} {'as built':>14} {'its twin':>14} {'twin/built':>10}")
    for part, (twin_name, _, twin) in PARTS.items():
        built, alone = got[(part, "", str(ROOT))], got[(part, twin, str(ROOT))]
        print(f"{part:48} {built:>14,} {alone:>14,} {alone / built:>9.2f}x   ({twin_name})")
    if args.no_sse2_build is not None:
        for part in ("Folder.buffer (tests --no-class)", "Folder.buffer + take (tests, diagnose --all)"):
            built, plain = got[(part, "", str(ROOT))], got[(part + " [SSE2 off]", "", str(args.no_sse2_build))]
            print(f"{part + ': SSE2 compares':48} {built:>14,} {plain:>14,} {plain / built:>9.2f}x   (byte loops)")


if __name__ == "__main__":
    main()
