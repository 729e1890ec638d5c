"""``cvdiag report --history DB`` in a real browser (headless chromium): the history
page's chart, flaky table and strip of runs, reached from the report's index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from historykit import run_log
from reportkit import browser, visit

FLAKY = "tests/test_chat.py::test_flaky"
HOSTILE = 'tests/test_chat.py::test_x[<img src=x onerror="window.pwned=1">]'
PLAN = {
    "tests/test_chat.py::test_hello": ["pass"] * 4,
    FLAKY: ["pass", "llm-error", "server-error", "llm-error"],
    HOSTILE: ["server-error", "pass", "pass", "pass"],
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history-report")
    db = folder / "history.duckdb"
    for k in range(4):
        log = run_log(folder / f"run{k}.log", {n: kinds[k] for n, kinds in PLAN.items()}, f"r{k}", day=k)
        assert run("history", "add", log, "--db", db, "--run-id", f"run-{k}", "--commit", f"c{k}").code == 0
    out = folder / "report.html"
    done = run("report", folder / "run3.log", "--history", db, "-o", out)
    assert done.code == 0, done.err
    return out


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    with browser() as b:
        yield b


def test_the_history_page_shows_classes_flaky_tests_and_runs(chrome: Any, report: Path) -> None:
    with visit(chrome, report) as seen:
        page = seen.page
        assert not page.is_visible("#history")
        link = page.text_content("#history-link")
        assert link == "History: 4 runs, 2 flaky tests"
        page.click("#history-link")
        page.wait_for_selector("#history", state="visible")
        assert not page.is_visible("#app")
        segments = page.eval_on_selector_all(
            "#history-classes rect.seg", "rs => rs.map(r => [r.dataset.period, r.dataset.class, r.textContent])"
        )
        assert sorted(s[:2] for s in segments) == [
            ["2026-11-21", "server-error"], ["2026-11-22", "llm-error"], ["2026-11-23", "server-error"],
            ["2026-11-24", "llm-error"]]  # fmt: skip
        assert "2026-11-22: llm-error 1 of 3 results" in [s[2] for s in segments]
        heights = page.eval_on_selector_all("#history-classes rect.seg", "rs => rs.map(r => r.getBBox().height)")
        assert all(h > 10 for h in heights)
        legend = page.text_content("#history-legend")
        assert "server-error" in legend and "llm-error" in legend
        rows = page.eval_on_selector_all(
            "#history-flaky tbody tr", "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))"
        )
        assert [r[:5] for r in rows] == [
            [FLAKY, "4", "3", "75%", "llm-error 2, server-error 1"],
            [HOSTILE, "4", "1", "25%", "server-error 1"],
        ]
        strip = page.eval_on_selector_all(
            "#history-strip tbody tr", "trs => trs.map(tr => [...tr.querySelectorAll('.run')].map(s => s.className))"
        )
        assert strip[0] == ["run pass", "run fail", "run fail", "run fail"]
        tip = page.get_attribute("#history-strip tbody tr:first-child .run:nth-child(2)", "title")
        assert tip == "2026-11-22 10:00 · run-1 · c1 · fail · llm-error"
        assert page.evaluate("window.pwned") is None  # the hostile name is text
        page.click("#history-back")
        page.wait_for_selector("#index")
        assert page.is_visible("#app") and not page.is_visible("#history")
        seen.assert_clean()
