"""The pytest plugin as pytest users expect it: the short summary names the class, the
failure section is drawn at the terminal's width, a test whose id is on no line says so
and points at the ids seen meanwhile, and the session's report names the session and
offers pytest's own option for every test's waterfall (checked in a real browser)."""

from __future__ import annotations

import pytest
from pytestkit import INNER, INNER_APP
from reportkit import browser, visit
from test_report import embedded

from cvdiag.face.render import cells

pytest_plugins = ["pytester"]

_TESTS = (
    INNER_APP
    + """

def test_answers(cvdiag_headers):
    assert TestClient(app).get("/chat", headers=cvdiag_headers).text == "hello"


def test_provider_down_with_a_long_name_that_a_narrow_terminal_cuts(cvdiag_headers):
    assert TestClient(app).get("/chat", params={"q": "break"}, headers=cvdiag_headers).status_code == 200


def test_sent_under_another_id():
    # the request goes out with an id of its own: no line carries this test's id
    TestClient(app).get("/chat", headers={"x-test-id": "someone-else-1"})
    assert False, "no answer"
"""
)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_failure_section_fits_pytest_terminal_and_the_summary_names_the_class(
    pytester: pytest.Pytester, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    monkeypatch.setenv("COLUMNS", str(width))
    result = pytester.runpytest_subprocess(*INNER, "-rf")

    result.assert_outcomes(passed=1, failed=2)
    text = result.stdout.str()
    sections = _cvdiag_sections(text)
    assert len(sections) == 2, text
    wide = [line for section in sections for line in section if cells(line) > width]
    assert not wide, (wide, text)
    # the short summary line, where it has room: FAILED node - class: reason | the test's own error
    if width >= 120:
        result.stdout.fnmatch_lines(["FAILED test_inner.py::test_provider_down_with_* - llm-error: LLM call*"])


def _cvdiag_sections(text: str) -> list[list[str]]:
    """The lines of each ``cvdiag`` section of pytest's failure report."""
    sections: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("-") and " cvdiag " in line:
            sections.append([])
            inside = True
        elif line.startswith(("___", "===", "---")):
            inside = False
        elif inside:
            sections[-1].append(line)
    return sections


def test_a_test_whose_id_is_on_no_line_points_at_the_ids_seen_meanwhile(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    result = pytester.runpytest(*INNER, "-k", "another_id")

    result.assert_outcomes(failed=1)
    text = " ".join(result.stdout.str().split())
    assert "diagnosis: none (no envelope with this id in-process)" in text
    assert "cvdiag saw lines under 1 other id: its requests may have gone without the x-test-id header" in text
    assert "someone-else-1: " in text and "backend.request.ingress" in text


def test_the_session_report_names_the_session_and_offers_pytest_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    out = pytester.path / "session.html"

    pytester.runpytest(*INNER, "--cvdiag-report", str(out))

    index, details = embedded(out.read_text())
    assert index["meta"]["sources"] == ["pytest session (3 tests)"]
    assert index["meta"]["all_command"] == "pytest --cvdiag-report-all"
    assert len(details) == 1  # the failed test with envelopes; the passing one has none

    with browser() as chrome, visit(chrome, out) as seen:
        page = seen.page
        note = page.text_content("#index p.muted")
        assert "pytest session (3 tests)" in note and "pytest --cvdiag-report-all for every test" in note
        assert "in-process.ndjson" not in page.content()  # no temporary file named
        name = '#grid tr.row span[title*="long_name"]'
        cut = page.eval_on_selector(name, "s => s.parentElement.scrollWidth > s.parentElement.clientWidth")
        assert not cut, "the node id is cut though the page has room"
        page.click('#grid tr.row:has-text("test_answers")')
        page.wait_for_selector("#no-detail")
        assert "pytest --cvdiag-report-all" in page.text_content("#no-detail")
        assert "cvdiag report --all" not in page.text_content("#no-detail")
        seen.assert_clean()


def test_report_all_gives_every_test_a_waterfall(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    out = pytester.path / "all.html"

    result = pytester.runpytest(*INNER, "--cvdiag-report", str(out), "--cvdiag-report-all")

    result.stdout.fnmatch_lines([f"cvdiag report: {out} (3 tests, 1 failed, *MB)"])
    index, details = embedded(out.read_text())
    assert len(details) == len(index["rows"]) >= 3
    alone = pytester.runpytest(*INNER, "--cvdiag-report-all")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--cvdiag-report-all needs --cvdiag-report PATH*"])


def test_a_failure_at_the_default_tier_says_what_the_tier_left_out(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner=INNER_APP
        + """
import pytest

@pytest.mark.cvdiag(tier="default")
def test_answers_at_the_default_tier(cvdiag_headers):
    assert TestClient(app).get("/chat", headers=cvdiag_headers).text == "goodbye"
"""
    )
    result = pytester.runpytest(*INNER)

    result.assert_outcomes(failed=1)
    text = " ".join(result.stdout.str().split())
    assert "note: recorded at the default tier" in text
    assert "CVDIAG_TIER=verbose on the server writes them" in text
