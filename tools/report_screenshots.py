"""Screenshots of the HTML report for the docs (docs/images/report-*.png), in headless chromium.

    python tools/report_screenshots.py

The log is the labelled diagnosis corpus (every class) plus the three-layer story of the
browser tests (a provider 500 and a retry, heartbeats, a silence, a hang-up).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reportkit import CHROMIUM_ARGS, STORY_ID, chromium, story  # noqa: E402

IMAGES = ROOT / "docs" / "images"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "app.log"
        with log.open("w") as fh:
            for name in ("hand.jsonl", "backend.jsonl"):
                for line in (ROOT / "tests" / "corpus" / name).read_text().splitlines():
                    for env in json.loads(line)["events"]:
                        fh.write("CVDIAG " + json.dumps(env, separators=(",", ":")) + "\n")
            for env in story():
                fh.write("CVDIAG " + json.dumps(env, separators=(",", ":")) + "\n")
        page_path = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "cvdiag", "report", str(log), "-o", str(page_path)], check=True)
        from playwright.sync_api import sync_playwright

        IMAGES.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
            page.goto(page_path.as_uri())
            page.click('th[data-sort="duration"] button')
            page.screenshot(path=str(IMAGES / "report-index.png"))
            page.evaluate("id => { location.hash = 'test=' + encodeURIComponent(id) }", STORY_ID)
            page.wait_for_selector("#waterfall svg")
            marker = page.query_selector('#waterfall [data-ev="7"]').bounding_box()
            page.mouse.move(marker["x"] + marker["width"] / 2, marker["y"] + marker["height"] / 2)  # its tooltip
            page.screenshot(path=str(IMAGES / "report-waterfall.png"), full_page=False)
            browser.close()
    print(f"wrote {IMAGES / 'report-index.png'} and {IMAGES / 'report-waterfall.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
