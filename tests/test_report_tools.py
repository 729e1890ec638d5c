"""Tool calls in the HTML report, in a real browser (headless chromium): a tools lane
under the backend's, the failed call marked, its excerpt on hover; the passing test with a
swallowed tool error is flagged (it gets a waterfall although its HTTP was healthy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from logkit import TID_OK, TID_TOOL, TOOL_EXCERPT, compact, happy, tool_failure, write
from reportkit import browser, visit


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report-tools")
    log = write(folder / "app.log", [f"CVDIAG {compact(e)}" for e in [*happy(), *tool_failure()]])
    out = folder / "report.html"
    result = run("report", log, "-o", out, env={"NO_COLOR": "1"})
    assert result.code == 0, result.err
    assert "2 tests, 1 failed, 1 with a waterfall" in result.err + result.out
    return out


@pytest.fixture
def page(report: Path) -> Iterator[Any]:
    with browser() as b, visit(b, report) as seen:
        yield seen.page
        seen.assert_clean()


def _open(page: Any, test_id: str) -> None:
    page.evaluate("id => { location.hash = 'test=' + encodeURIComponent(id) }", test_id)
    page.wait_for_selector(f'#detail[data-id="{test_id}"]')


def test_the_index_names_the_tool_error(page: Any) -> None:
    chips = page.eval_on_selector_all(".chip", "cs => cs.map(c => c.dataset.class)")
    assert sorted(chips) == ["ok", "tool-error"]
    row = page.query_selector(f'#grid tr.row[data-id="{TID_TOOL}"]')
    assert "tool-error" in row.text_content()
    assert TOOL_EXCERPT in row.get_attribute("title")  # the reason, on hover


def test_the_waterfall_has_a_tools_lane_with_the_failed_call_marked(page: Any) -> None:
    _open(page, TID_TOOL)
    lanes = page.eval_on_selector_all("#waterfall g.lane", "gs => gs.map(g => g.dataset.layer)")
    assert lanes == ["backend", "tools"]
    bars = page.eval_on_selector_all("#waterfall g.bar-tool", "gs => gs.map(g => [g.dataset.outcome, g.dataset.label])")
    assert sorted(bars) == [
        ["err", f"forecast (mcp, server weather) \u00b7 240 ms \u00b7 protocol: {TOOL_EXCERPT}"],
        ["ok", "clock (wire) \u00b7 20 ms"],
    ]
    failed = page.query_selector('#waterfall g.bar-tool[data-outcome="err"] rect')
    assert failed.get_attribute("fill") == "url(#hatch-err)"  # hatched and outlined like every failed bar
    markers = page.eval_on_selector_all(
        "#waterfall [data-boundary^='backend.tool.']", "ns => ns.map(n => n.dataset.boundary)"
    )
    assert sorted(markers) == ["backend.tool.call.response"] * 2 + ["backend.tool.call.start"] * 2


def test_hovering_the_failed_call_shows_its_excerpt(page: Any) -> None:
    _open(page, TID_TOOL)
    page.hover('#waterfall g.bar-tool[data-outcome="err"] rect')
    tip = page.wait_for_selector(".tip:not([hidden])")
    assert tip.query_selector(".tip-error").text_content() == TOOL_EXCERPT
    assert tip.query_selector("b").text_content() == "backend.tool.call.response \u00b7 err"
    page.mouse.move(2, 2)
    assert page.is_hidden(".tip")


def test_a_test_without_tool_calls_has_no_tools_lane(tmp_path: Path) -> None:
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in happy()])
    assert run("report", log, "--all", "-o", tmp_path / "all.html").code == 0
    with browser() as b, visit(b, tmp_path / "all.html") as seen:
        _open(seen.page, TID_OK)
        assert seen.page.eval_on_selector_all("#waterfall g.lane", "gs => gs.map(g => g.dataset.layer)") == ["backend"]
        seen.assert_clean()
