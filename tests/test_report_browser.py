"""The HTML report in a real browser (headless chromium): what a user sees and can do.

Every visit also checks that the page made no request but its own file and logged no
console error (``Visit.assert_clean``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cvdiag_cli import run
from logkit import TID_ABORT, TID_ERROR, TID_OK, aborted, compact, errored, happy, write
from reportkit import STORY_ID, browser, story, visit


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hostile = aborted("hostile-test")
    hostile[0]["metadata"]["path"] = '<img src=x onerror="window.pwned=1">'
    envs = [*happy(), *aborted(), *errored(), *story(), *hostile]
    return write(tmp_path_factory.mktemp("log") / "app.log", [f"CVDIAG {compact(e)}" for e in envs])


@pytest.fixture(scope="module")
def report(log: Path) -> Path:
    out = log.with_name("report.html")
    result = run("report", log, "-o", out)
    assert result.code == 0, result.err
    return out


@pytest.fixture
def page(chrome: Any, report: Path) -> Iterator[Any]:
    with visit(chrome, report) as seen:
        yield seen.page
        seen.assert_clean()


def shown_ids(page: Any) -> list[str]:
    return page.eval_on_selector_all("#grid tr.row", "rows => rows.map(r => r.dataset.id)")


def cells(page: Any, column: int) -> list[str]:
    return page.eval_on_selector_all(f"#grid tr.row td:nth-child({column})", "tds => tds.map(t => t.textContent)")


def test_index_lists_every_test_with_its_class_and_counts(page: Any) -> None:
    assert set(shown_ids(page)) == {TID_OK, TID_ABORT, TID_ERROR, STORY_ID, "hostile-test"}
    assert page.text_content("#count") == "showing 5 of 5"
    chips = dict(
        page.eval_on_selector_all(".chip", "cs => cs.map(c => [c.dataset.class, c.querySelector('.n').textContent])")
    )
    assert chips == {"ok": "1", "client-disconnect": "2", "server-error": "1", "llm-error": "1"}
    assert cells(page, 1)[:4] == ["✖ fail"] * 4 and cells(page, 1)[4] == "✔ ok"  # failed first
    assert page.query_selector(".hist svg.chart rect") is not None  # the duration distribution


def test_filters_narrow_the_rows(page: Any) -> None:
    page.fill("#q", "retry")
    assert shown_ids(page) == [STORY_ID]
    page.fill("#q", "")
    page.select_option("#status", "passed")
    assert shown_ids(page) == [TID_OK]
    page.select_option("#status", "all")
    page.click('.chip[data-class="client-disconnect"]')
    assert set(shown_ids(page)) == {TID_ABORT, "hostile-test"}
    assert page.text_content("#count") == "showing 2 of 5"
    page.click('.chip[data-class="client-disconnect"]')  # again: the filter is off
    assert len(shown_ids(page)) == 5


def test_sorting_by_a_column_and_back(page: Any) -> None:
    def durations() -> list[float]:
        return page.eval_on_selector_all(
            "#grid tr.row", "rows => rows.map(r => Number(r.children[4].textContent.split(' ')[0]) "
            "* (r.children[4].textContent.endsWith(' s') ? 1000 : 1))"
        )  # fmt: skip

    page.click('th[data-sort="duration"] button')
    assert durations() == sorted(durations(), reverse=True)
    assert page.get_attribute('th[data-sort="duration"]', "aria-sort") == "descending"
    page.click('th[data-sort="duration"] button')
    assert durations() == sorted(durations())
    assert page.get_attribute('th[data-sort="duration"]', "aria-sort") == "ascending"


def test_keyboard_moves_through_tests_opens_one_and_comes_back(page: Any) -> None:
    order = shown_ids(page)
    page.focus("#grid tr.row[tabindex='0']")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.id") == order[2]
    page.keyboard.press("Enter")
    page.wait_for_selector("#detail")
    assert page.get_attribute("#detail", "data-id") == order[2]
    page.keyboard.press("]")
    page.wait_for_selector(f'#detail[data-id="{order[3]}"]')
    page.keyboard.press("Escape")
    page.wait_for_selector("#index")
    assert page.evaluate("document.activeElement.dataset.id") == order[3]


def open_test(page: Any, test_id: str) -> None:
    page.evaluate("id => { location.hash = 'test=' + encodeURIComponent(id) }", test_id)
    page.wait_for_selector(f'#detail[data-id="{test_id}"]')


def test_waterfall_draws_a_lane_per_layer_and_every_event(page: Any, log: Path) -> None:
    open_test(page, STORY_ID)

    lanes = page.eval_on_selector_all("#waterfall g.lane", "gs => gs.map(g => g.dataset.layer)")
    assert lanes == ["probe", "backend", "aimock"]
    drawn = page.eval_on_selector_all("#waterfall [data-ev]", "ns => ns.map(n => n.dataset.boundary)")
    assert sorted(drawn) == sorted(e["boundary"] for e in story())
    assert len(page.query_selector_all("#waterfall line.hb")) == 2  # heartbeats as ticks
    llm = page.eval_on_selector_all("#waterfall g.bar-llm", "gs => gs.map(g => [g.dataset.outcome, g.dataset.label])")
    assert [o for o, _ in llm] == ["err", "timeout"]  # the retry beside the failed attempt
    assert "attempt 0" in llm[0][1] and "HTTP 500" in llm[0][1] and "attempt 1" in llm[1][1]
    assert page.query_selector("#waterfall .first-token") is not None
    assert page.eval_on_selector_all("#waterfall .silence-g", "gs => gs.map(g => +g.dataset.gapMs)") == [1640]
    request = page.eval_on_selector_all(
        "#waterfall g.bar-request", "gs => gs.map(g => [g.dataset.outcome, g.dataset.label])"
    )
    assert ["err", "aborted rst after 84 B, 3.48 s"] in request  # the terminal, by outcome
    assert ["err", "aborted rst after 200 B, 2.81 s"] in request  # aimock's side of it


def test_the_diagnosis_and_its_evidence_are_on_top(page: Any, log: Path) -> None:
    verdict = json.loads(run("diagnose", STORY_ID, log, "--json").out)[0]
    open_test(page, STORY_ID)

    assert f"verdict: {verdict['class']}" in page.text_content("#diagnosis .verdict")
    assert page.text_content("#diagnosis .reason") == verdict["reason"]
    page.click("#diagnosis summary")
    assert "llm_error_class InternalServerError" in page.text_content("#evidence")
    top = page.eval_on_selector("#diagnosis", "n => n.getBoundingClientRect().top")
    assert top < page.eval_on_selector("#waterfall", "n => n.getBoundingClientRect().top")


def test_every_event_shows_its_whole_envelope(page: Any) -> None:
    open_test(page, STORY_ID)
    shown = []
    for i in range(len(story())):
        page.click(f'#events tr[data-ev="{i}"]')
        shown.append(json.loads(page.text_content("#envelope-json")))

    original = story()
    key = lambda e: (e["ts"], e["boundary"])  # noqa: E731 - a sort key
    for got, want in zip(sorted(shown, key=key), sorted(original, key=key), strict=True):
        assert got == {**want, "span_id": got["span_id"]}  # ids are fresh per call of story()
        assert list(got) == list(want)  # wire order


def test_clicking_a_marker_selects_its_event(page: Any) -> None:
    open_test(page, STORY_ID)
    page.click('#waterfall [data-boundary="backend.sse.aborted"]', force=True)

    assert json.loads(page.text_content("#envelope-json"))["boundary"] == "backend.sse.aborted"
    selected = page.get_attribute('#events tr[aria-selected="true"]', "data-ev")
    assert page.get_attribute(f'#waterfall [data-ev="{selected}"]', "data-boundary") == "backend.sse.aborted"


def test_events_table_is_keyboard_navigable(page: Any) -> None:
    open_test(page, STORY_ID)
    page.focus('#events tr[data-ev="0"]')
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.ev") == "2"
    assert json.loads(page.text_content("#envelope-json"))["boundary"] == story()[2]["boundary"]


def test_a_passed_test_says_how_to_get_its_waterfall(page: Any) -> None:
    open_test(page, TID_OK)
    assert "--all" in page.text_content("#no-detail")
    assert page.query_selector("#waterfall") is None


def test_hostile_text_is_shown_as_text(page: Any) -> None:
    open_test(page, "hostile-test")
    assert '<img src=x onerror="window.pwned=1">' in page.text_content("#events")
    assert page.query_selector("#detail img") is None
    assert page.evaluate("window.pwned") is None


def test_dark_mode_follows_the_system(chrome: Any, report: Path) -> None:
    with visit(chrome, report, dark=True) as seen:
        bg = seen.page.evaluate("getComputedStyle(document.body).backgroundColor")
        seen.assert_clean()
    channels = [int(c) for c in bg[bg.index("(") + 1 : bg.index(")")].split(",")[:3]]
    assert max(channels) < 60, bg


def test_compare_shows_two_runs_side_by_side_and_where_they_part(chrome: Any, tmp_path: Path) -> None:
    envs = [*happy("pass-run-1"), *story("fail-run-2")]
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    out = tmp_path / "report.html"
    assert run("report", log, "--compare", "pass-run-1", "fail-run-2", "-o", out).code == 0
    expected = json.loads(run("compare", "pass-run-1", "fail-run-2", log, "--json").out)["first_divergence"]

    with visit(chrome, out) as seen:
        page = seen.page
        assert page.text_content("#divergence") == f"▶ first divergence: {expected['reason']}"
        diverged = page.eval_on_selector_all("#compare tbody tr", "rs => rs.map(r => r.className)")
        assert diverged.index("diverge") == expected["index"]
        page.click('#compare button[data-open="pass-run-1"]')  # a passing run: its waterfall is kept too
        page.wait_for_selector('#detail[data-id="pass-run-1"] #waterfall svg')
        seen.assert_clean()


def test_compare_with_an_unknown_id_says_so(log: Path, tmp_path: Path) -> None:
    result = run("report", log, "--compare", TID_OK, "no-such-test", "-o", tmp_path / "r.html")
    assert result.code == 1
    assert "no test id 'no-such-test'" in result.err


def test_odd_but_readable_envelopes_are_drawn_and_shown_as_logged(chrome: Any, tmp_path: Path) -> None:
    """A custom layer, a microsecond timestamp and a duration that is not a number."""
    envs = aborted("odd-test")
    envs[1]["ts"] = envs[1]["ts"][:-1] + "456Z"  # microseconds: kept as written
    envs.insert(
        2, dict(envs[1], layer="worker", boundary="worker.job.done", duration_ms="12", span_id="00000000000000aa")
    )
    log = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in envs])
    out = tmp_path / "report.html"
    assert run("report", log, "-o", out).code == 0

    with visit(chrome, out) as seen:
        page = seen.page
        open_test(page, "odd-test")
        lanes = page.eval_on_selector_all("#waterfall g.lane", "gs => gs.map(g => g.dataset.layer)")
        assert lanes == ["backend", "worker"]
        assert len(page.query_selector_all("#waterfall [data-ev]")) == len(envs)
        shown = []
        for i in range(len(envs)):
            page.click(f'#events tr[data-ev="{i}"]')
            shown.append(json.loads(page.text_content("#envelope-json")))
        assert sorted(shown, key=lambda e: e["span_id"]) == sorted(envs, key=lambda e: e["span_id"])
        seen.assert_clean()


def test_a_malformed_link_to_a_test_opens_the_index(chrome: Any, report: Path) -> None:
    """A hand-edited or cut link (``#test=%E0``) is no reason for a blank page."""
    context = chrome.new_context()
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.resolve().as_uri() + "#test=%E0")
        page.wait_for_selector("#index #grid tr.row")
        assert errors == []
    finally:
        context.close()
