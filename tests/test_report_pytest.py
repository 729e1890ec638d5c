"""``pytest --cvdiag-report PATH``: an inner pytest session (pytester) writes the report
of its tests, named by node id, and the page shows the failed one's waterfall."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestkit import INNER, INNER_APP
from reportkit import browser, visit
from test_report import embedded, rows_by_id

pytest_plugins = ["pytester"]

_TESTS = (
    INNER_APP
    + """

def test_answers(cvdiag_headers):
    assert TestClient(app).get("/chat", headers=cvdiag_headers).text == "hello"


def test_provider_down(cvdiag_headers):
    assert TestClient(app).get("/chat", params={"q": "break"}, headers=cvdiag_headers).status_code == 200
"""
)


def test_the_session_report_names_each_test_and_explains_the_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    out = pytester.path / "session.html"

    result = pytester.runpytest(*INNER, "--cvdiag-report", str(out))

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"cvdiag report: {out} (2 tests, 1 failed, *MB)"])
    index, details = embedded(out.read_text())
    by_name = {row["label"]: row for row in rows_by_id(index).values()}
    assert set(by_name) == {"test_inner.py::test_answers", "test_inner.py::test_provider_down"}
    failed = by_name["test_inner.py::test_provider_down"]
    assert failed["failed"] == 1 and index["strings"][failed["class"]] == "llm-error"
    assert by_name["test_inner.py::test_answers"]["failed"] == 0
    assert len(details) == 1

    with browser() as chrome, visit(chrome, out) as seen:
        page = seen.page
        page.click('#grid tr.row:has-text("test_provider_down")')
        page.wait_for_selector("#waterfall")
        assert page.text_content("#detail h1") == "test_inner.py::test_provider_down"
        assert "llm-error" in page.text_content("#diagnosis")
        seen.assert_clean()


def test_no_report_option_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=_TESTS)
    result = pytester.runpytest(*INNER)

    result.assert_outcomes(passed=1, failed=1)
    assert "cvdiag report" not in result.stdout.str()
    assert list(Path(pytester.path).glob("*.html")) == []
