"""Benchmark the read side against grep / grep|sed|jq on the same big log, in one run.

Whole processes, warm page cache, best of ``--runs``; peak RSS from ``wait4``. Makes
the log with ``make_big_log.py`` (fixed seed) when it is missing. Not part of CI.

    python tools/bench_cli.py [--log /tmp/cvdiag-bench-1g.log] [--mb 1024] [--runs 3] [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
JQ_FIELDS = "{test_id,layer,boundary,slug,ts,outcome}"


def cvdiag() -> list[str]:
    script = Path(sys.executable).with_name("cvdiag")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cvdiag"]


def python_fold(argv: list[str]) -> str:
    """``argv`` as a shell command with the compiled fold turned off (the baseline it replaces)."""
    return "CVDIAG_COMPILED=0 " + " ".join(shlex.quote(a) for a in argv)


def measure(argv: list[str] | str, runs: int) -> tuple[float, float]:
    """(best wall seconds, peak RSS in MB) of a whole process; stdout goes to /dev/null."""
    best, rss = float("inf"), 0.0
    for _ in range(runs):
        with open(os.devnull, "wb") as null:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=null, stderr=subprocess.DEVNULL, shell=isinstance(argv, str))
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        best = min(best, wall)
        rss = max(rss, usage.ru_maxrss / 1024)
    return best, rss


def paired(first: list[str], second: list[str], rounds: int) -> tuple[float, float]:
    """``second``'s time over ``first``'s, each round running one right after the other:
    (the median of the rounds' ratios, best over best). Measured apart, minutes from each
    other, two commands can land in different phases of a noisy box."""
    ratios, bests = [], [float("inf"), float("inf")]
    for _ in range(rounds):
        times = [measure(first, 1)[0], measure(second, 1)[0]]
        ratios.append(times[1] / times[0])
        bests = [min(b, t) for b, t in zip(bests, times, strict=True)]
    return statistics.median(ratios), bests[1] / bests[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", default="/tmp/cvdiag-bench-1g.log")
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pairs", type=int, default=5, help="rounds of tests then report, for their ratio")
    args = p.parse_args(argv)
    log = Path(args.log)
    meta = log.with_suffix(".json")
    if not log.exists() or not meta.exists():
        print(f"making {log} ({args.mb} MB, fixed seed) ...", file=sys.stderr)
        with log.open("w", encoding="utf-8", buffering=1 << 20) as fh:
            sys.path.insert(0, str(HERE))
            from make_big_log import generate

            meta.write_text(json.dumps(generate(fh, args.mb << 20)))
    info = json.loads(meta.read_text())
    test_id = info["middle_id"]
    size_mb = log.stat().st_size / 1e6
    for tool in ("grep", "sed", "jq"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed; install it to compare", file=sys.stderr)
            return 1
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    # Byte-compile cvdiag as an install would (pip writes .pyc): with PYTHONDONTWRITEBYTECODE
    # set, every run would otherwise compile its modules again, tens of ms of start-up.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(log.with_name("cvdiag-bench-pycache"))
    package = Path(__file__).resolve().parent.parent / "cvdiag"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)

    cv, f = cvdiag(), str(log)
    tiny = log.with_name("cvdiag-bench-tiny.log")
    with log.open("rb") as src:
        tiny.write_bytes(b"".join(src.readline() for _ in range(20)))
    jq_pipe = (
        f"grep -F schema_version {f} | sed -E 's/^[^{{]*(\\{{\"schema_version)/\\1/' "
        f"| jq -c -R 'fromjson? | {JQ_FIELDS}'"
    )
    cases = {
        # Through `cat`: GNU grep whose output is /dev/null stops at its first match (it
        # knows nothing it prints is read), which would time half a file, not all of it.
        "grep -F ID": f"grep -F {shlex.quote(test_id)} {shlex.quote(f)} | cat",
        "cvdiag timeline ID": [*cv, "timeline", test_id, f],
        "grep | sed | jq": jq_pipe,
        "cvdiag tests --no-class -j1": [*cv, "tests", "--no-class", "-j", "1", f],
        "cvdiag tests --no-class -j2": [*cv, "tests", "--no-class", "-j", "2", f],
        "cvdiag tests -j1 (with class)": [*cv, "tests", "-j", "1", f],
        "cvdiag tests -j2 (with class)": [*cv, "tests", "-j", "2", f],
        "cvdiag tests -j1 (with class, Python fold)": python_fold([*cv, "tests", "-j", "1", f]),
        "cvdiag tests -j2 (with class, Python fold)": python_fold([*cv, "tests", "-j", "2", f]),
        "cvdiag report -j1": [*cv, "report", "-j", "1", "-o", os.devnull, f],
        "cvdiag report -j2": [*cv, "report", "-j", "2", "-o", os.devnull, f],
        "cvdiag stats -j1": [*cv, "stats", "-j", "1", f],
        "cvdiag stats -j2": [*cv, "stats", "-j", "2", f],
        "cvdiag grep --test-id ID": [*cv, "grep", "--test-id", test_id, f],
        "python -c pass": [sys.executable, "-c", "pass"],
        "cvdiag start-up (tests, 20 lines)": [*cv, "tests", "--no-class", str(tiny)],
    }
    results: dict[str, tuple[float, float]] = {}
    for name, cmd in cases.items():
        # The slow baselines once; every cvdiag command best of --runs (the box is noisy:
        # one run of the same command varies by a quarter).
        runs = 1 if name == "grep | sed | jq" or "Python fold" in name else args.runs
        if "start-up" in name or name == "python -c pass":
            runs = 10
        results[name] = measure(cmd, runs)
        wall, rss = results[name]
        print(f"{name:38s} {wall:8.3f} s  {size_mb / wall:8.1f} MB/s  {rss:7.1f} MB RSS", flush=True)
    r = results
    print()
    print(
        f"log: {size_mb:.0f} MB, {info['envelopes']} envelopes, "
        f"{info['noise_lines']} noise lines, {info['tests']} tests"
    )
    print(f"timeline / grep -F          : {r['cvdiag timeline ID'][0] / r['grep -F ID'][0]:.2f}x  (target <= 1.5x)")
    for jobs in ("-j1", "-j2"):
        wall = r[f"cvdiag tests --no-class {jobs}"][0]
        speedup = r["grep | sed | jq"][0] / wall
        print(f"tests --no-class {jobs}        : {size_mb / wall:.0f} MB/s, {speedup:.1f}x faster than grep|sed|jq")
    for jobs in ("-j1", "-j2"):
        wall = r[f"cvdiag tests {jobs} (with class)"][0]
        speedup = r["grep | sed | jq"][0] / wall
        python = r[f"cvdiag tests {jobs} (with class, Python fold)"][0] / wall
        print(
            f"tests {jobs} with class        : {size_mb / wall:.0f} MB/s, {speedup:.1f}x faster than grep|sed|jq,"
            f" {python:.1f}x the Python fold"
        )
    for jobs in ("-j1", "-j2"):
        tests, report = cases[f"cvdiag tests {jobs} (with class)"], cases[f"cvdiag report {jobs}"]
        ratio = r[f"cvdiag report {jobs}"][0] / r[f"cvdiag tests {jobs} (with class)"][0]
        median, best = paired(tests, report, args.pairs)
        print(
            f"report {jobs} / tests {jobs}      : {ratio:.2f}x best of {args.runs} apart; {median:.2f}x median,"
            f" {best:.2f}x best, of {args.pairs} rounds back to back (target <= 1.2x)"
        )
    startup = r["cvdiag start-up (tests, 20 lines)"][0]
    print(
        f"start-up                    : {startup * 1000:.0f} ms "
        f"(bare interpreter {r['python -c pass'][0] * 1000:.0f} ms)"
    )
    peak = max(r[k][1] for k in r if k.startswith("cvdiag") and "start-up" not in k)
    print(f"peak RSS of cvdiag commands : {peak:.0f} MB (target < 150 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
