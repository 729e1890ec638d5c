"""Benchmark the history: ingest rate and ``history flaky`` over 1,000,000 results, on
DuckDB and on PostgreSQL (a throwaway cluster of Debian's packages, or
``CVDIAG_TEST_POSTGRES_URL``).

    PYTHONPATH=$PWD .venv/bin/python tools/bench_history.py [--runs 1000] [--tests 1000]

Each figure comes with a baseline measured in the same run on the same database:
ingest against inserting the same rows one statement at a time (what bulk loading
saves), and ``flaky`` against one plain scan of every result (what the question costs
over reading the table once). Targets (issue 17): ingest >= 50,000 results/s into
DuckDB and >= 10,000/s into PostgreSQL; ``flaky`` over 1,000 runs x 1,000 tests within
1 s on DuckDB and 3 s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cvdiag.history import queries
from cvdiag.history.backend import open_store
from cvdiag.history.store import RESULT_COLUMNS, Result, Run

CLASSES = ("llm-error", "server-error", "client-disconnect", "llm-slow")


def make_run(k: int, tests: int, rng: random.Random) -> tuple[Run, list[Result]]:
    """Run ``k``: 5 % of tests flaky (fail 1 run in 8), 1 % always failing."""
    run_id = f"bench-{k:05d}"
    day, minute = divmod(k, 1440)
    started = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:00.000Z"
    results = []
    for i in range(tests):
        flaky, broken = i % 20 == 0, i % 100 == 1
        failed = broken or (flaky and rng.random() < 0.125)
        results.append(Result(
            run_id, f"tests/e2e/test_shop.py::test_case_{i:05d}", f"{run_id}-{i:05d}", "fail" if failed else "pass",
            rng.choice(CLASSES) if failed else "ok", 0.9, "the provider answered 429" if failed else "",
            rng.uniform(100, 5000), 300.0, 800.0, 1, 120, 0, "shop", started,
        ))  # fmt: skip
    return Run(
        run_id, started, f"{k // 3:040x}", "main", None, "bench", tests, sum(r.status == "fail" for r in results)
    ), results


def ingest(url: str, runs: int, tests: int) -> tuple[float, float]:
    """Results per second adding ``runs`` runs, each in its own transaction: by the wall
    clock, and by this process's CPU time (DuckDB works in-process: on a shared machine
    its CPU time says what the wall clock would on an idle one). Making the rows in
    Python is not counted: one run's are made just before it is added."""
    rng = random.Random(17)
    store = open_store(url, write=True)
    wall = cpu = 0.0
    try:
        for k in range(runs):
            run, results = make_run(k, tests, rng)
            start, start_cpu = time.perf_counter(), time.process_time()
            store.add_run(run, results)
            wall += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
        return runs * tests / wall, runs * tests / cpu
    finally:
        store.close()


def one_at_a_time(url: str, tests: int) -> float:
    """The baseline: the same kind of rows inserted one INSERT at a time, in one transaction."""
    rng = random.Random(18)
    _run, results = make_run(99_999, tests, rng)
    store = open_store(url, write=True)
    placeholders = ", ".join(["%s"] * len(RESULT_COLUMNS))
    sql = f"INSERT INTO results ({', '.join(RESULT_COLUMNS)}) VALUES ({placeholders})"
    try:
        if url.startswith("postgresql://"):
            conn = store.conn  # type: ignore[attr-defined]
            start = time.perf_counter()
            with conn.transaction(force_rollback=True), conn.cursor() as cur:
                for r in results:
                    cur.execute(sql, [getattr(r, c) for c in RESULT_COLUMNS])
        else:
            con = store.con  # type: ignore[attr-defined]
            start = time.perf_counter()
            con.execute("BEGIN TRANSACTION")
            for r in results:
                con.execute(sql.replace("%s", "?"), [getattr(r, c) for c in RESULT_COLUMNS])
            con.execute("ROLLBACK")
        return tests / (time.perf_counter() - start)
    finally:
        store.close()


def timed(fn: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def questions(url: str, runs: int) -> tuple[float, float, float, int]:
    """(flaky s, full-scan baseline s, the whole ``cvdiag history flaky`` command s, flaky tests)."""
    store = open_store(url)
    try:
        found = queries.flaky(store, window=runs)
        flaky_s = timed(lambda: queries.flaky(store, window=runs))
        scan_s = timed(lambda: store.fetch("SELECT count(*), sum(duration_ms) FROM results"))
    finally:
        store.close()
    cmd = [sys.executable, "-m", "cvdiag", "history", "flaky", "--db", url, "--runs", str(runs), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                          os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    command_s = timed(lambda: subprocess.run(cmd, env=env, capture_output=True, check=True))
    return flaky_s, scan_s, command_s, len(found)


def bench(name: str, url: str, runs: int, tests: int) -> None:
    rate, cpu_rate = ingest(url, runs, tests)
    base = one_at_a_time(url, min(tests, 2000))
    cpu = f" (by this process's CPU time {cpu_rate:,.0f}/s)" if name == "duckdb" else ""
    print(
        f"{name:10} ingest  {rate:>10,.0f} results/s{cpu}   one INSERT at a time {base:>8,.0f}/s"
        f"   x{rate / base:,.0f}   load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    flaky_s, scan_s, command_s, found = questions(url, runs)
    print(f"{name:10} flaky   {flaky_s:>10.3f} s over {runs * tests:,} results ({found} flaky shown)"
          f"   one full scan {scan_s:.3f} s   x{flaky_s / scan_s:.1f}   whole command {command_s:.3f} s")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--tests", type=int, default=1000)
    p.add_argument("--only", choices=("duckdb", "postgres"))
    args = p.parse_args()
    with ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="cvdiag-bench-"))
        if args.only != "postgres":
            bench("duckdb", os.path.join(folder, "history.duckdb"), args.runs, args.tests)
        if args.only != "duckdb":
            import pgkit

            server = stack.enter_context(pgkit.cluster())
            bench("postgres", pgkit.fresh_database(server, "cvdiag_bench"), args.runs, args.tests)


if __name__ == "__main__":
    main()
