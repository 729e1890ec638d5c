"""Results where CI shows them: the pytest plugin's JUnit XML properties, and
``cvdiag tests --format github|junit`` for harnesses that are not pytest."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cvdiag_cli import run
from logkit import TID_ABORT, TID_ERROR, TID_HARNESS, TID_OK, aborted, compact, errored, every_shape, happy, write
from pytestkit import INNER
from test_pytest_plugin import INNER_APP

pytest_plugins = ["pytester"]


def _properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_junit_xml_carries_class_reason_and_test_id_of_every_failed_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(inner_app=INNER_APP)
    pytester.makepyfile(
        """
        import pytest
        from starlette.testclient import TestClient
        from inner_app import app

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("cannot tear down")

        def test_chat_answers(record_property):
            record_property("mine", "kept")
            with TestClient(app) as client:
                assert client.get("/broken").status_code == 200

        def test_passes():
            with TestClient(app) as client:
                assert client.get("/stream").status_code == 200

        def test_teardown(broken_teardown):
            pass
        """
    )
    xml_path = pytester.path / "junit.xml"
    result = pytester.runpytest(*INNER, f"--junitxml={xml_path}")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    cases = {c.get("name"): c for c in ET.parse(xml_path).getroot().iter("testcase")}
    failed = _properties(cases["test_chat_answers"])
    assert failed["mine"] == "kept"  # the user's own properties stay
    assert failed["cvdiag_class"] == "llm-error"
    assert "ConnectionError" in failed["cvdiag_reason"]
    assert f"test id: {failed['cvdiag_test_id']}" in result.stdout.str()  # the id the report section names
    assert _properties(cases["test_passes"]) == {}
    torn = _properties(cases["test_teardown"])
    assert torn["cvdiag_class"] == "none" and torn["cvdiag_reason"].startswith("no envelope with this id")
    assert len(list(cases["test_teardown"].iter("property"))) == 3  # once, not once per phase


@pytest.fixture
def log(tmp_path: Path) -> Path:
    lines, _ = every_shape()
    return write(tmp_path / "app.log", lines)


def test_github_format_annotates_each_failed_test(log: Path) -> None:
    r = run("tests", "--format", "github", log)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert len(lines) == 2
    by_id = {line.rsplit("test ", 1)[1].rstrip(")"): line for line in lines}
    assert set(by_id) == {TID_ABORT, TID_ERROR}
    assert by_id[TID_ABORT].startswith("::error title=client-disconnect::The client went away (rst)")
    assert by_id[TID_ERROR].startswith("::error title=server-error::")


def test_github_format_escapes_what_would_break_the_command(tmp_path: Path) -> None:
    events = errored(TID_ERROR)
    events[1]["metadata"]["exception_type"] = "Bad%Err\r\nor"
    events[1]["metadata"]["message_scrubbed"] = "50% done,\r\nthen::error title=fake::x \x1b[31m"
    path = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    (line,) = run("tests", "--format", "github", path).out.splitlines()
    assert line.startswith("::error title=server-error::")
    message = line.split("::", 2)[2]
    assert "%" not in message.replace("%25", "").replace("%0D", "").replace("%0A", "")
    assert "Bad%25Err%0D%0Aor" in message and "50%25 done," in message
    assert "\x1b" not in line and "\r" not in line


def test_github_property_escaping_follows_the_toolkit() -> None:
    from cvdiag.face._ci import github_data, github_property

    assert github_property("a:b,c%d\r\n") == "a%3Ab%2Cc%25d%0D%0A"
    assert github_data("a:b,c%d\r\n\x1b") == "a:b,c%25d%0D%0A\\x1b"


def test_junit_format_has_one_testcase_per_test_with_failures_named(log: Path) -> None:
    r = run("tests", "--format", "junit", log)
    assert r.code == 0, r.err
    root = ET.fromstring(r.out)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("4", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {TID_OK, TID_ABORT, TID_ERROR, TID_HARNESS}
    assert cases[TID_OK].find("failure") is None
    failure = cases[TID_ABORT].find("failure")
    assert failure.get("type") == "client-disconnect"
    assert failure.get("message").startswith("The client went away (rst)")
    assert TID_ABORT in failure.text
    assert _properties(cases[TID_ABORT])["cvdiag_class"] == "client-disconnect"
    assert cases[TID_OK].get("classname") == "cvdiag.agno" and cases[TID_OK].get("time") == "0.610"


def test_junit_format_is_valid_xml_whatever_the_log_holds(tmp_path: Path) -> None:
    events = [*aborted("a\x1b-\x07id"), *happy()]
    for env in events:
        env["slug"] = 'x<&"\x01'
    path = write(tmp_path / "app.log", [f"CVDIAG {compact(e)}" for e in events])
    r = run("tests", "--format", "junit", path)
    root = ET.fromstring(r.out)
    names = sorted(c.get("name") for c in root.iter("testcase"))
    assert names == sorted([TID_OK, "a\\x1b-\\x07id"])


def test_format_json_matches_the_json_flag(log: Path) -> None:
    assert json.loads(run("tests", "--format", "json", log).out) == json.loads(run("tests", "--json", log).out)
