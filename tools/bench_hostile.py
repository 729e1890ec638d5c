"""Peak memory (VmHWM) and time of the real ``cvdiag`` on hostile inputs (issues 18, 35).

Writes the inputs of issue 18's items 11 and 12 and issue 35's (one test with many
heartbeats, a new boundary name or test id on every line, app JSON that is no envelope,
cut heads, a gzip of 100 MiB of cut heads), then runs each command in a fresh parent so
``getrusage(RUSAGE_CHILDREN)`` is the peak of that one process. Each time is also given
as a ratio to ``grep -c CVDIAG`` on the same input in the same run (``zcat | grep -c``
for a gzip): what reading it at all costs on this machine now. Compare two trees in the
same run with ``--tree``:

    python tools/bench_hostile.py --scale 0.2 --tree before=/tmp/main --tree after=.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TID = "0190a9c0-1a2b-7c3d-8e4f-5a6b7c8d9e01"
_LINE = (
    'CVDIAG {{"schema_version":1,"test_id":"{tid}","trace_id":"{tid}","span_id":"{i:016x}",'
    '"parent_span_id":null,"layer":"backend","boundary":"{boundary}","slug":"agno","demo":"chat",'
    '"ts":"2026-11-21T10:00:00.000Z","mono_ns":1000000,"duration_ms":null,"outcome":"info",'
    '"edge_headers":{{"cf-ray":null,"cf-mitigated":null,"cf-cache-status":null,"x-railway-edge":null,'
    '"x-railway-request-id":null,"x-vercel-id":null,"x-amzn-trace-id":null,"server":null,"via":null}},'
    '"metadata":{{"elapsed_ms_since_start":{i}}},"_metadata_dropped":false,"_truncated":false}}\n'
)


def _gz(path: Path, lines: object) -> Path:
    with gzip.open(path, "wb", compresslevel=6) as fh:
        for line in lines:  # type: ignore[attr-defined]
            fh.write(line.encode())
    return path


def inputs(out: Path, scale: float) -> dict[str, tuple[Path, list[str]]]:
    """name -> (input, cvdiag arguments before it)."""
    n = lambda k: max(1, int(k * scale))  # noqa: E731
    beat = "backend.llm.call.heartbeat"
    beats = _gz(out / "beats.log.gz", (_LINE.format(tid=TID, i=i, boundary=beat) for i in range(n(600_000))))
    names = _gz(
        out / "names.log.gz", (_LINE.format(tid=TID, i=i, boundary=f"backend.made_up_{i}") for i in range(n(1_000_000)))
    )
    ids = _gz(out / "ids.log.gz", (_LINE.format(tid=f"t-{i}", i=i, boundary=beat) for i in range(n(1_000_000))))
    app = out / "app.log"
    app_lines = (json.dumps({"schema_version": 2, "event": "login", "user": i}) + "\n" for i in range(n(80_000)))
    app.write_text("".join(app_lines))
    heads = out / "heads.log"
    heads.write_text("CVDIAG {\n" * n(80_000))
    bomb = _gz(out / "bomb.log.gz", ("CVDIAG {\n" * 65536 for _ in range(n(180))))  # 100 MiB at scale 1
    return {
        "tests, gzip bomb of cut heads": (bomb, ["tests"]),
        "grep, gzip bomb of cut heads": (bomb, ["grep"]),
        "diagnose ID, one test's heartbeats": (beats, ["diagnose", TID]),
        "diagnose --all, same file": (beats, ["diagnose", "--all"]),
        "timeline ID, same file": (beats, ["timeline", TID]),
        "stats, distinct boundary names": (names, ["stats"]),
        "tests --no-class, distinct test ids": (ids, ["tests", "--no-class"]),
        "tests, app JSON with schema_version": (app, ["tests"]),
        "tests, cut CVDIAG heads": (heads, ["tests"]),
        "validate --json, gzip bomb of cut heads": (bomb, ["validate", "--json"]),
    }


_WRAPPER = (
    "import resource, subprocess, sys\n"
    "subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def measure(tree: str, args: list[str], timeout: float, cwd: str) -> tuple[float, float]:
    """(seconds, peak MB) of ``python -m cvdiag ARGS`` with ``tree`` first on the path (run
    in ``cwd``, away from any source tree: ``-m`` puts the working directory first)."""
    env = {**os.environ, "PYTHONPATH": tree}
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", _WRAPPER, sys.executable, "-m", "cvdiag", *args],
            env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=True,
        ).stdout  # fmt: skip
    except subprocess.TimeoutExpired:
        return float("inf"), float("nan")
    return time.perf_counter() - start, int(out.split()[-1]) / 1024


def baseline(path: Path) -> float:
    """Seconds of ``grep -c CVDIAG`` on ``path`` (``zcat | grep -c`` for a gzip)."""
    start = time.perf_counter()
    if path.suffix == ".gz":
        subprocess.run(f"zcat {path} | grep -c CVDIAG", shell=True, stdout=subprocess.DEVNULL, check=False)
    else:
        subprocess.run(["grep", "-c", "CVDIAG", str(path)], stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the issue's sizes (default 1)")
    p.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="a source tree to run")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a run counts as a hang")
    a = p.parse_args()
    trees = [t.split("=", 1) for t in a.tree] or [["this", str(Path(__file__).resolve().parents[1])]]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with tempfile.TemporaryDirectory() as tmp:
        cases = inputs(Path(tmp), a.scale)
        names = " | ".join(f"{name}: time, x grep -c, VmHWM" for name, _ in trees)
        print(f"| input (scale {a.scale}) | size | grep -c | {names} |")
        print("|---|---|---|" + "---|" * len(trees))
        for label, (path, args) in cases.items():
            cells = []
            base = baseline(path)
            for _, tree in trees:
                secs, peak = measure(str(Path(tree).resolve()), [*args, str(path)], a.timeout, tmp)
                cells.append(
                    f"past {a.timeout:.0f} s"
                    if secs == float("inf")
                    else f"{secs:.1f} s, {secs / base:.0f}x, {peak:.0f} MB"
                )
            size = f"{path.stat().st_size / 1e6:.1f} MB"
            print(f"| {label} | {size} | {base:.2f} s | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
