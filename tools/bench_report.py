"""How long ``cvdiag report`` takes on 10,000 tests, how big the page is, and how fast
it opens in headless chromium.

    python tools/bench_report.py                 # ~10,000 tests, log in /tmp
    python tools/bench_report.py --tests 2000

The log comes from ``make_big_log.generate`` (its fixed seed), sized for the number of
tests asked for. Baselines from the same run: ``cvdiag tests`` on the same log (the
report reads it once for rows, diagnoses and where each test's events are, then only
the lines of the tests it details) and the log's own size. Load
time: navigation start to DOMContentLoaded, and to the index drawn (the page's own mark);
then the time to open the first failed test's waterfall. Best of 3 page loads.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

from make_big_log import generate  # noqa: E402
from reportkit import CHROMIUM_ARGS, chromium  # noqa: E402


def make_log(path: Path, tests: int) -> dict:
    """A log of about ``tests`` tests: a 2 MB sample gives the bytes per test."""
    sample = generate(io.StringIO(), 2 << 20)
    per_test = sample["bytes"] / sample["tests"]
    with path.open("w", encoding="utf-8", buffering=1 << 20) as fh:
        return generate(fh, int(per_test * tests))


def cvdiag(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cvdiag", *args], check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def load_times(page_path: Path, runs: int = 3) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    best: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(page_path.as_uri(), wait_until="load")
            nav = page.evaluate(
                "(() => { const n = performance.getEntriesByType('navigation')[0];"
                " return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, drawn: window.__cvdiagRendered}; })()"
            )
            rows = page.eval_on_selector_all("#grid tr.row", "rs => rs.length")
            page.focus("#grid tr.row[tabindex='0']")
            start = time.perf_counter()
            page.keyboard.press("Enter")
            page.wait_for_selector("#waterfall svg, #no-detail")
            opened = (time.perf_counter() - start) * 1000
            for key, value in (*nav.items(), ("open_test", opened)):
                best[key] = min(best.get(key, value), value)
            best["rows_in_dom"] = rows
            page.close()
        browser.close()
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=10_000)
    ap.add_argument("--dir", default="/tmp", help="where the log and the reports go")
    args = ap.parse_args(argv)
    folder = Path(args.dir)
    log = folder / f"cvdiag-bench-report-{args.tests}.log"
    if not log.exists():
        info = make_log(log, args.tests)
        print(f"log: {log} ({info['tests']} tests, {info['envelopes']} envelopes, {info['bytes'] / 1e6:.0f} MB)")
    log_mb = os.path.getsize(log) / 1e6
    tests_s = cvdiag("tests", str(log), "--json")
    print(f"{'cvdiag tests --json (baseline)':<34} {tests_s:7.2f} s   log {log_mb:.0f} MB")
    for label, extra in (("report (failed in detail)", []), ("report --all", ["--all"])):
        out = folder / f"cvdiag-bench-report-{args.tests}{'-all' if extra else ''}.html"
        build_s = cvdiag("report", str(log), "-o", str(out), *extra)
        size_mb = os.path.getsize(out) / 1e6
        print(f"{label:<34} {build_s:7.2f} s   {build_s / tests_s:4.2f}x tests   page {size_mb:.1f} MB "
              f"({size_mb / log_mb:.1%} of the log)")  # fmt: skip
        if chromium() is None:
            print("  (no chromium: load time not measured)")
            continue
        t = load_times(out)
        print(f"  load: DOMContentLoaded {t['dcl']:.0f} ms, index drawn {t['drawn']:.0f} ms, load {t['load']:.0f} ms, "
              f"open a waterfall {t['open_test']:.0f} ms ({t['rows_in_dom']} rows in the DOM)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
